/** The records stored in LMDB (see `keys.ts` for where each lives). Timestamps are ISO-8601 UTC. */

// The change graph's records belong to the model, which defines them beside its store interface.
export type { BookmarkRecord, ChangeRecord, EvolutionRecord, OperationRecord } from '../vcs/repo-store.js';

export interface OrgRecord {
  id: string;
  slug: string;
  name: string;
  created_at: string;
}

export type KeyStatus = 'active' | 'disabled' | 'revoked';

export interface PublicJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
}

export interface SigningKeyRecord {
  id: string;
  org_id: string;
  name: string;
  scopes: string[];
  repo_ids: string[] | null;
  tags: Record<string, string>;
  status: KeyStatus;
  created_at: string;
  revoked_at: string | null;
  public_jwk: PublicJwk;
}

export type UpstreamAuthKind = 'token' | 'username_password';

export interface UpstreamRecord {
  url: string;
  auth_kind: UpstreamAuthKind | null;
  /** The credential sealed with the data directory's secret key (`secret-box.ts`); never returned. */
  sealed_auth: string | null;
}

export interface RepoRecord {
  id: string;
  org_id: string;
  name: string;
  default_bookmark: string;
  created_at: string;
  updated_at: string;
  tags: Record<string, string>;
  upstream: UpstreamRecord | null;
  /** The latest operation of this repository (operations form a chain through `parent`). */
  last_op_id: string | null;
}

export interface EventEnvelope {
  id: string;
  type: string;
  occurred_at: string;
  organization: { id: string; slug: string; name: string };
  repository: { id: string; name: string; url: string } | null;
  data: Record<string, unknown>;
}

/** File metadata of `set_metadata` (API §5.4): current values only, outside git history. */
export type FileMetadataRecord = Record<string, string>;

export type SyncDirection = 'pull' | 'push';
export type SyncStatus = 'queued' | 'in_progress' | 'completed' | 'failed';
export type SyncRefOutcome = 'updated' | 'unchanged' | 'filtered' | 'rejected';

/** One ref a sync considered (API §9 `stats.refs`); `before`/`after` are the destination's values. */
export interface SyncRefStat {
  /** Full ref name (`refs/heads/main`, `refs/tags/v1`). */
  name: string;
  before: string | null;
  after: string | null;
  outcome: SyncRefOutcome;
}

/** An upstream sync (API §9). Written only by the repository actor's sync commands. */
export interface SyncRecord {
  id: string;
  repo_id: string;
  org_id: string;
  direction: SyncDirection;
  status: SyncStatus;
  /** Tries started. */
  attempt: number;
  ref_globs: { branches: string; tags: string };
  stats: { refs: SyncRefStat[] } | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** Epoch ms before which a queued sync must not start (retry backoff); 0 = at once. */
  next_attempt_at: number;
}

/** A tag pulled from the upstream: the ref's object (a tag object or a commit) and its commit. */
export interface TagRecord {
  name: string;
  oid: string;
  target_commit: string | null;
}
