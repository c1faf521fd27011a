/**
 * Actor addresses: what `ActorRuntime.call` routes on. A repository's writes all go to its own
 * actor; org-level writes (repository create, rename, delete; webhook targets) to the org's.
 */
const REPO_PREFIX = 'repo:';
const ORG_PREFIX = 'org:';

export const orgActor = (orgId: string): string => `${ORG_PREFIX}${orgId}`;
export const repoActor = (repoId: string): string => `${REPO_PREFIX}${repoId}`;

/** The repository an actor address belongs to, or null for any other actor. */
export function repoIdOfActor(actor: string): string | null {
  return actor.startsWith(REPO_PREFIX) ? actor.slice(REPO_PREFIX.length) : null;
}

/** The org of an org actor's address (any address that is not a repository's is an org's). */
export function orgIdOfActor(actor: string): string {
  return actor.slice(ORG_PREFIX.length);
}
