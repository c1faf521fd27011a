import { allowedRepoIds, isRestricted } from './auth/principal.js';
import type { PrincipalMsg } from '../protocol/messages.js';
import type { Reply, RequestContext } from './route.js';

/**
 * The principal as an actor message carries it. A repository-restricted token's allowed ids are
 * resolved here, at the request, because `repos` names resolve to whatever repository bears the
 * name now.
 */
function principalMsg(ctx: RequestContext): PrincipalMsg {
  const { principal } = ctx;
  if (!isRestricted(principal)) return principal.msg;
  return { ...principal.msg, restricted: true, allowedRepoIds: allowedRepoIds(ctx.services.storage, principal) ?? [] };
}

/**
 * Sends a command to an actor on behalf of a request and relays the serialized reply. Not before
 * the request's connection has settled: a pipelined request read with this one closes it, and
 * a command already sent would be applied without its response.
 */
export async function callActor(ctx: RequestContext, actor: string, command: string, input: unknown): Promise<Reply> {
  // A repeat looks for the key's record on the declared actor's shard only (RouteDef.actor).
  if (ctx.idempotency && ctx.idempotency.actor !== actor) throw new Error(`${command} goes to ${actor}, not to the declared ${ctx.idempotency.actor}`);
  await ctx.connection.connectionSettled();
  const reply = await ctx.services.runtime.call({
    actor,
    command,
    input,
    principal: principalMsg(ctx),
    traceId: ctx.traceId,
    idempotency: ctx.idempotency ? { keyId: ctx.principal.key.id, key: ctx.idempotency.key, fingerprint: ctx.idempotency.fingerprint } : undefined,
  });
  return { status: reply.status, json: reply.body };
}
