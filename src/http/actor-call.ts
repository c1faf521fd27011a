import type { Reply, RequestContext } from './route.js';

/** Sends a command to an actor on behalf of a request and relays the serialized reply. */
export async function callActor(ctx: RequestContext, actor: string, command: string, input: unknown): Promise<Reply> {
  const reply = await ctx.services.runtime.call({
    actor,
    command,
    input,
    principal: ctx.principal.msg,
    traceId: ctx.traceId,
    idempotency: ctx.idempotency ? { keyId: ctx.principal.key.id, key: ctx.idempotency.key, fingerprint: ctx.idempotency.fingerprint } : undefined,
  });
  return { status: reply.status, json: reply.body };
}

export const orgActor = (orgId: string): string => `org:${orgId}`;
export const repoActor = (repoId: string): string => `repo:${repoId}`;
