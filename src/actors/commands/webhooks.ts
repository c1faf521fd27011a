import { randomBytes } from 'node:crypto';
import { ServiceError, aborted, invalid, notFound } from '../../errors.js';
import { newId } from '../../storage/ids.js';
import { deliveryView, webhookTargetView } from '../../protocol/views/webhooks.js';
import { enqueueDelivery, findDelivery, repoExists, targetVisible, type DeliveryRecord, type WebhookTargetRecord } from '../../storage/webhook-store.js';
import { defineCommand, type CommandContext } from '../command.js';

/**
 * Webhook target and redelivery commands (API §11). They run in the org's actor so that writes
 * to an org's targets are serialized with repository creation and deletion (a target's repo_ids
 * are checked against the repositories that exist at that very step). The targets themselves are
 * the org directory's records (global data every node reads), written through it.
 *
 * Every input carries `allowed_repo_ids`: the repositories a restricted caller may reach (null =
 * unrestricted), resolved by the front end. Such a caller sees and manages only targets whose
 * repo_ids lie within them and cannot create org-wide targets (API §2).
 */
interface Restricted {
  org_id: string;
  allowed_repo_ids: string[] | null;
}

export interface CreateTargetInput extends Restricted {
  url: string;
  name: string;
  events: string[];
  repo_ids: string[] | null;
}

export interface UpdateTargetInput extends Restricted {
  target_id: string;
  url?: string;
  name?: string;
  events?: string[];
  /** Absent: unchanged; null: org-wide. */
  repo_ids?: string[] | null;
}

export interface TargetInput extends Restricted {
  target_id: string;
}

export interface RedeliverInput extends TargetInput {
  delivery_id: string;
  /**
   * In a cluster, the delivery as the owner of its shard holds it (null: no owner has it), read
   * by the front end: this node may hold no copy of that shard, or one behind its owner's.
   * Absent on a single node, whose LMDB holds every shard: the delivery is found here.
   */
  original?: DeliveryRecord | null;
}

function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/**
 * Checks a new `repo_ids`. Ids the target already lists may stay although their repository was
 * deleted since (a client sends back what it read); any other id must name a repository of the
 * org that the caller reaches.
 */
function checkRepoIds(ctx: CommandContext, input: Restricted, repoIds: string[] | null, listed: readonly string[] = []): string[] | null {
  if (repoIds === null) {
    if (input.allowed_repo_ids !== null) throw new ServiceError('FORBIDDEN', 'a repository-restricted token cannot manage org-wide webhook targets');
    return null;
  }
  const unique = [...new Set(repoIds)];
  const exists = repoExists(ctx.storage.meta, input.org_id);
  const departed = (id: string): boolean => listed.includes(id) && !exists(id);
  if (input.allowed_repo_ids !== null) {
    const outside = unique.filter((id) => !input.allowed_repo_ids!.includes(id) && !departed(id));
    if (outside.length) throw new ServiceError('FORBIDDEN', 'this token may not access every repository in repo_ids', { repo_ids: outside });
  }
  const unknown = unique.filter((id) => !exists(id) && !departed(id));
  if (unknown.length) throw invalid('repo_ids must name existing repositories of this organization', { repo_ids: unknown });
  return unique;
}

/** The target, if it exists and the caller may manage it; NOT_FOUND otherwise (no existence leak). */
function reachableTarget(ctx: CommandContext, input: TargetInput): WebhookTargetRecord {
  const target = ctx.directory.target(input.org_id, input.target_id);
  if (!target || !targetVisible(target, input.allowed_repo_ids, repoExists(ctx.storage.meta, input.org_id))) throw notFound('NOT_FOUND', `webhook target "${input.target_id}" not found`);
  return target;
}

/** Stores the target; the batch's answers about the org's targets no longer hold (batch.ts). */
function saveTarget(ctx: CommandContext, target: WebhookTargetRecord): void {
  ctx.directory.putTarget(target);
  ctx.batch.forgetTargets();
}

export const createTarget = defineCommand<CreateTargetInput>('webhook.target.create', (input, ctx) => {
  const now = ctx.now.toISOString();
  const secret = newSecret();
  const target: WebhookTargetRecord = {
    id: newId('wht'),
    org_id: input.org_id,
    name: input.name,
    url: input.url,
    events: [...new Set(input.events)],
    repo_ids: checkRepoIds(ctx, input, input.repo_ids),
    sealed_secret: ctx.secrets.seal(secret),
    created_at: now,
    updated_at: now,
  };
  saveTarget(ctx, target);
  return { status: 201, body: { ...webhookTargetView(target), secret }, schema: 'webhookTargetCreated' };
});

export const updateTarget = defineCommand<UpdateTargetInput>('webhook.target.update', (input, ctx) => {
  const target = reachableTarget(ctx, input);
  if (input.url !== undefined) target.url = input.url;
  if (input.name !== undefined) target.name = input.name;
  if (input.events !== undefined) target.events = [...new Set(input.events)];
  if (input.repo_ids !== undefined) target.repo_ids = checkRepoIds(ctx, input, input.repo_ids, target.repo_ids ?? []);
  target.updated_at = ctx.now.toISOString();
  saveTarget(ctx, target);
  return { status: 200, body: webhookTargetView(target), schema: 'webhookTarget' };
});

/**
 * Removes the target. Its delivery log and queue are on the shards of the actors that made them:
 * each shard's owner removes them there once it sees the target gone (webhook actor).
 */
export const deleteTarget = defineCommand<TargetInput>('webhook.target.delete', (input, ctx) => {
  const target = reachableTarget(ctx, input);
  ctx.directory.removeTarget(target.org_id, target.id);
  ctx.batch.forgetTargets();
  return { status: 200, body: { success: true }, schema: 'success' };
});

// The contract (§3) keeps the old secret signing for 24 h beside the new one; the issue that
// introduced rotation overrides it: after a rotation only the new secret signs.
export const rotateTargetSecret = defineCommand<TargetInput>('webhook.target.rotate-secret', (input, ctx) => {
  const target = reachableTarget(ctx, input);
  const secret = newSecret();
  target.sealed_secret = ctx.secrets.seal(secret);
  target.updated_at = ctx.now.toISOString();
  saveTarget(ctx, target);
  return { status: 200, body: { secret }, schema: 'webhookSecret' };
});

/** A new delivery of the same event (same body) to the same target; the original stays in the log. */
export const redeliver = defineCommand<RedeliverInput>('webhook.redeliver', (input, ctx) => {
  const target = reachableTarget(ctx, input);
  const { meta } = ctx.storage;
  const original = input.original === undefined ? findDelivery(meta, target.id, input.delivery_id) : input.original;
  if (!original) throw notFound('NOT_FOUND', `delivery "${input.delivery_id}" not found`);
  if (original.status === 'pending') throw aborted('the delivery is still pending; redeliver it once it has succeeded or failed');
  const now = ctx.now.toISOString();
  const delivery: DeliveryRecord = {
    ...original,
    id: newId('dlv'),
    status: 'pending',
    attempts: 0,
    last_status_code: null,
    last_error: null,
    next_attempt_at: now,
    redelivery_of: original.id,
    created_at: now,
  };
  // On the org's shard, this actor's: a redelivery is the org's (`deliveryShard`).
  enqueueDelivery(meta, delivery);
  return { status: 201, body: deliveryView(delivery), schema: 'webhookDelivery' };
});

export const webhookCommands = [createTarget, updateTarget, deleteTarget, rotateTargetSecret, redeliver];
