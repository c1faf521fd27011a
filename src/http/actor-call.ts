import { isRestricted } from './auth/principal.js';
import { reachableRepoIds } from './auth/restriction-reads.js';
import { repoIdOfActor } from '../actors/actor-names.js';
import { withAllowance } from '../actors/quota-refill.js';
import type { PrincipalMsg, QuotaGrantMsg } from '../protocol/messages.js';
import type { Reply, RequestContext } from './route.js';
import type { ActorResponse } from '../actors/runtime.js';
import type { StepCall } from '../actors/repo-saga.js';

/**
 * A repository-restricted principal as an actor message carries it: its allowed ids are
 * resolved here, at the request, because `repos` names resolve to whatever repository bears the
 * name now.
 */
async function restrictedMsg(ctx: RequestContext): Promise<PrincipalMsg> {
  const { principal } = ctx;
  return { ...principal.msg, restricted: true, allowedRepoIds: (await reachableRepoIds(ctx.services, principal)) ?? [] };
}

/**
 * Sends a command to an actor on behalf of a request and relays the serialized reply. Not before
 * the request's connection has settled: a pipelined request read with this one closes it, and
 * a command already sent would be applied without its response. A repository's write its
 * shard's quota allowance refused is sent again once the org granted the shard more
 * (quota-refill.ts). `blobs`: the objects the input's ops name by index (ActorRequest.blobs).
 */
export async function callActor(ctx: RequestContext, actor: string, command: string, input: unknown, blobs?: Uint8Array[]): Promise<Reply> {
  // A repeat looks for the key's record on the declared actor's shard only (RouteDef.actor).
  if (ctx.idempotency && ctx.idempotency.actor !== actor) throw new Error(`${command} goes to ${actor}, not to the declared ${ctx.idempotency.actor}`);
  const reply = await stepCaller(ctx)(actor, command, input, true, blobs);
  // A webhook target written on another thread or node: this node's view shows it before the 2xx.
  if (reply.directoryRevision) await ctx.services.directory.reached(reply.directoryRevision);
  return relay(reply);
}

export const relay = (reply: ActorResponse): Reply => ({ status: reply.status, json: reply.body });

/** The steps of a saga (actors/repo-saga.ts) sent on behalf of the request, as `callActor` sends one. */
export function stepCaller(ctx: RequestContext): StepCall {
  return async (actor, command, input, keyed = true, blobs) => {
    await ctx.connection.connectionSettled();
    const { runtime, config } = ctx.services;
    // Unrestricted (the common case): the message as it is, without a turn of the event loop.
    const principal = isRestricted(ctx.principal) ? await restrictedMsg(ctx) : ctx.principal.msg;
    const send = (quotaGrant?: QuotaGrantMsg) =>
      runtime.call({
        actor,
        command,
        input,
        blobs,
        principal,
        traceId: ctx.traceId,
        idempotency: keyed && ctx.idempotency ? { keyId: ctx.principal.key.id, key: ctx.idempotency.key, fingerprint: ctx.idempotency.fingerprint } : undefined,
        quotaGrant,
      });
    const repoId = repoIdOfActor(actor);
    return repoId === null ? send() : withAllowance(runtime, ctx.org.id, repoId, config.orgQuotaBytes, ctx.traceId, send);
  };
}
