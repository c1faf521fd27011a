/**
 * Moves org quota to the shard a write needs it on (main thread). A repository's command cannot
 * wait for the org inside its batch, so a write its shard's allowance cannot cover is refused
 * whole (quota.ts); the caller then asks the org's ledger for the missing bytes and sends the
 * write once more. When the ledger has not that much left, it names the other shards holding
 * allowance: each gives back what it has not used (a recall), and the ledger grants from that.
 * Every step is one command on one shard; a step lost to a crash leaves the ledger counting the
 * bytes as granted (never the org over its quota) until the next exchange with that shard, whose
 * absolute totals settle it (quota.ts).
 */
import { isServiceError } from '../errors.js';
import type { PrincipalMsg, QuotaGrantMsg } from '../protocol/messages.js';
import type { Storage } from '../storage/database.js';
import type { GrantAnswer } from '../storage/quota-ledger.js';
import { quotaFull, refusalAfterRefill, roomOf, shardAllowance, shortfallOf } from '../storage/quota.js';
import { repoShard } from '../storage/shards.js';
import type { QuotaGrantInput, QuotaShardInput } from './commands/quota.js';
import { orgActor, repoActor } from './actor-names.js';
import type { ActorCaller } from './actor-caller.js';

const QUOTA: PrincipalMsg = { orgId: '', orgSlug: '', keyId: '', keyName: 'quota', permissions: [], authors: [], restricted: false, allowedRepoIds: [] };

async function send<T>(runtime: ActorCaller, actor: string, command: string, input: unknown, traceId: string): Promise<T> {
  const reply = await runtime.call({ actor, command, input, principal: QUOTA, traceId });
  return JSON.parse(Buffer.from(reply.body).toString('utf8')) as T;
}

/**
 * Has the org's ledger grant `need` more bytes to the repository's shard: the ledger's new total
 * for the shard, or how many bytes the org lacks even after recalling what other shards held unused.
 */
async function grantAllowance(runtime: ActorCaller, orgId: string, repoId: string, need: number, traceId: string): Promise<{ granted: number } | { short: number }> {
  const shard = repoShard(repoId);
  const actor = repoActor(repoId);
  const ask = (returns: QuotaGrantInput['returns']): Promise<GrantAnswer> =>
    send<GrantAnswer>(runtime, orgActor(orgId), 'quota.grant', { org_id: orgId, shard, actor, need, returns } satisfies QuotaGrantInput, traceId);
  let answer = await ask([]);
  if ('short' in answer && answer.holders.length > 0) {
    const returns = await Promise.all(
      answer.holders.map(async (h) => {
        const input: QuotaShardInput = { org_id: orgId, shard: h.shard, granted: h.granted };
        const { returned } = await send<{ returned: number }>(runtime, h.actor, 'quota.return', input, traceId);
        return { shard: h.shard, returned };
      }),
    );
    answer = await ask(returns);
  }
  return 'short' in answer ? { short: answer.short } : { granted: answer.granted };
}

/**
 * Gets `need` more bytes of allowance onto the repository's shard. Returns 0 once they are there,
 * or how many bytes the org lacks even after recalling what other shards held unused.
 */
export async function refillAllowance(runtime: ActorCaller, orgId: string, repoId: string, need: number, traceId: string): Promise<number> {
  const answer = await grantAllowance(runtime, orgId, repoId, need, traceId);
  if ('short' in answer) return answer.short;
  const input: QuotaShardInput = { org_id: orgId, shard: repoShard(repoId), granted: answer.granted };
  await send(runtime, repoActor(repoId), 'quota.receive', input, traceId);
  return 0;
}

/**
 * Makes room for `bytes` on the repository's shard before anything is stored (a declared upload
 * at the front door), or refuses with 413 QUOTA_EXCEEDED. `limit` 0 is unlimited.
 */
export async function ensureRoom(runtime: ActorCaller, storage: Storage, orgId: string, repoId: string, limit: number, bytes: number, traceId: string): Promise<void> {
  if (limit <= 0) return;
  const room = roomOf(shardAllowance(storage.meta, repoShard(repoId), orgId));
  if (room > 0 && bytes <= room) return;
  const short = await refillAllowance(runtime, orgId, repoId, Math.max(1, bytes - Math.max(0, room)), traceId);
  if (short > 0) throw quotaFull(limit, bytes - short, bytes);
}

/**
 * Grants a refused write is sent again with. A recall by another shard's refill that reaches the
 * write's actor between the grant and the write takes the grant back (the recall carries the
 * ledger's total, fresh grant included); each further round follows a write of the org that stored
 * what it took, so a few settle a burst.
 */
const REFILL_ROUNDS = 4;

/**
 * Sends a repository's write; when its shard's allowance refuses it, has the org grant the shard
 * what it lacks and sends the write again, carrying the grant: its shard takes it in the write's
 * own batch, one message rather than two, which leaves a recall less room to come in between.
 * A refusal that stands reports the room the org really had.
 */
export async function withAllowance<T>(runtime: ActorCaller, orgId: string, repoId: string, limit: number, traceId: string, write: (grant?: QuotaGrantMsg) => Promise<T>): Promise<T> {
  let grant: QuotaGrantMsg | undefined;
  for (let round = 0; ; round++) {
    try {
      return await write(grant);
    } catch (err) {
      if (!isServiceError(err) || err.code !== 'QUOTA_EXCEEDED' || limit <= 0 || round === REFILL_ROUNDS) throw err;
      const answer = await grantAllowance(runtime, orgId, repoId, shortfallOf(err), traceId);
      if ('short' in answer) throw refusalAfterRefill(err, answer.short);
      grant = { orgId, granted: answer.granted };
    }
  }
}
