import { grant, creditReturn } from '../../storage/quota-ledger.js';
import { receiveGrant, returnUnspent, shardAllowance } from '../../storage/quota.js';
import { defineCommand } from '../command.js';

/**
 * The three messages that move org quota between the org's ledger and a shard (quota-refill.ts
 * drives them). Each touches one shard: `quota.grant` the org's (sent to the org's actor),
 * `quota.receive` and `quota.return` the shard of the repository actor they are sent to, which
 * need not exist any more (a deleted repository's shard can still hold allowance).
 */
export interface QuotaGrantInput {
  org_id: string;
  shard: number;
  /** The actor the refill came through: a recall of this shard's allowance is sent there. */
  actor: string;
  need: number;
  /** Totals returned by recalled shards, credited before granting. */
  returns: Array<{ shard: number; returned: number }>;
}

export interface QuotaShardInput {
  org_id: string;
  shard: number;
  /** The ledger's total granted to the shard (it may carry a grant the shard never received). */
  granted: number;
}

export const grantQuota = defineCommand<QuotaGrantInput>('quota.grant', (input, ctx) => {
  const { meta } = ctx.storage;
  for (const r of input.returns) creditReturn(meta, input.org_id, r.shard, r.returned);
  const answer = grant(meta, input.org_id, ctx.settings.orgQuotaBytes, input.shard, input.actor, input.need);
  return { status: 200, body: answer, schema: 'quotaGrant' };
});

export const receiveQuota = defineCommand<QuotaShardInput>('quota.receive', (input, ctx) => {
  const a = receiveGrant(ctx.storage.meta, input.shard, input.org_id, input.granted);
  return { status: 200, body: { granted: a.granted, returned: a.returned }, schema: 'quotaShard' };
});

export const returnQuota = defineCommand<QuotaShardInput>('quota.return', (input, ctx) => {
  const { meta } = ctx.storage;
  const returned = returnUnspent(meta, input.shard, input.org_id, input.granted);
  return { status: 200, body: { granted: shardAllowance(meta, input.shard, input.org_id).granted, returned }, schema: 'quotaShard' };
});

export const quotaCommands = [grantQuota, receiveQuota, returnQuota];
