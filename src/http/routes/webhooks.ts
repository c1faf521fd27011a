import { invalid, notFound } from '../../errors.js';
import { checkUrlAddress, checkUrlForm } from '../../net/address-policy.js';
import { createTargetBody, patchTargetBody, noBody } from '../../protocol/schemas/webhooks.js';
import { deliveryView, webhookTargetView } from '../../protocol/views/webhooks.js';
import type { CreateTargetInput, RedeliverInput, TargetInput, UpdateTargetInput } from '../../actors/commands/webhooks.js';
import { deliveryLists, deliveryOfEntry, findDelivery, repoExists, targetVisible, type DeliveryRecord, type WebhookTargetRecord } from '../../storage/webhook-store.js';
import { deliveryRecordKeys } from '../../storage/read/gathered-keys.js';
import { adoptWebhookDelivery } from '../../actors/system/webhooks/index.js';
import { callActor } from '../actor-call.js';
import { orgActor } from '../../actors/actor-names.js';
import { cursorPage, decodeCursor, hasString } from '../cursor.js';
import { newestOf } from '../shard-reads.js';
import { withBody, type RequestContext, type RouteDef } from '../route.js';
import { reachableRepoIds } from '../auth/restriction-reads.js';

/**
 * Webhook target routes (API §11). Writes go to the org's actor; reads are served here from the
 * org directory (targets) and the delivery log, which is kept per shard: an LMDB snapshot on a
 * single node, the shards' owners in a cluster. A repository-restricted admin only ever sees
 * targets whose repo_ids lie within its repositories (others are "not found" to it) and cannot
 * create org-wide ones (API §2).
 */

/** The address policy at the front door; the webhook actor applies it again at every connection. */
async function checkTargetUrl(ctx: RequestContext, raw: string): Promise<URL> {
  if (/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(raw)) throw invalid('url must not contain credentials (user:password@)');
  const url = checkUrlForm(raw, 'url');
  await checkUrlAddress(url, ctx.services.config.allowPrivateWebhooks, 'url');
  return url;
}

async function restriction(ctx: RequestContext): Promise<{ org_id: string; allowed_repo_ids: string[] | null }> {
  return { org_id: ctx.org.id, allowed_repo_ids: await reachableRepoIds(ctx.services, ctx.principal) };
}

/** The input naming the path's target to the org's actor, which checks it against the caller's restriction. */
async function targetInput(ctx: RequestContext): Promise<TargetInput> {
  return { ...(await restriction(ctx)), target_id: ctx.params.id! };
}

async function reachableTarget(ctx: RequestContext): Promise<WebhookTargetRecord> {
  const target = ctx.services.directory.target(ctx.org.id, ctx.params.id!);
  if (!target || !targetVisible(target, await reachableRepoIds(ctx.services, ctx.principal), repoExists(ctx.services.storage.meta, ctx.org.id))) {
    throw notFound('NOT_FOUND', `webhook target "${ctx.params.id}" not found`);
  }
  return target;
}

/**
 * In a cluster, the delivery of the path's target as the owner of its shard holds it, or null
 * (read from every shard's owner, one request per node: its id does not say which shard keeps
 * it); undefined on a single node, where the org's actor finds it in its own LMDB.
 */
async function deliveryFromOwner(ctx: RequestContext, deliveryId: string): Promise<DeliveryRecord | null | undefined> {
  const reads = ctx.services.shardReads;
  if (!reads) return undefined;
  // The target first: one the caller cannot reach is not found before anything is read.
  const { id } = await reachableTarget(ctx);
  return findDelivery(await reads.gather(deliveryRecordKeys(id, deliveryId)), id, deliveryId) ?? null;
}

const pageQuery = { keys: { cursor: { type: 'string' as const }, limit: { type: 'int' as const, min: 1, max: 100, default: 50 } } };

export const webhookRoutes: RouteDef[] = [
  withBody(createTargetBody, {
    method: 'POST',
    path: '/{org}/webhook-targets',
    permission: 'admin',
    actor: 'org',
    async handler(ctx) {
      const { body } = ctx;
      const url = await checkTargetUrl(ctx, body.url);
      const input: CreateTargetInput = {
        ...(await restriction(ctx)),
        url: body.url,
        name: body.name ?? url.host,
        events: body.events ?? ['push'],
        repo_ids: body.repo_ids ?? null,
      };
      return callActor(ctx, orgActor(ctx.org.id), 'webhook.target.create', input);
    },
  }),
  {
    method: 'GET',
    path: '/{org}/webhook-targets',
    permission: 'admin',
    query: pageQuery,
    async handler(ctx) {
      const cursor = decodeCursor(ctx.query.cursor, hasString('before'));
      const allowed = await reachableRepoIds(ctx.services, ctx.principal);
      const exists = repoExists(ctx.services.storage.meta, ctx.org.id);
      const page = cursorPage(ctx.services.directory.targetsNewestFirst(ctx.org.id, cursor?.before), ctx.query.limit as number, webhookTargetView, (t) => targetVisible(t, allowed, exists));
      return { status: 200, schema: 'webhookTargetPage', value: { webhook_targets: page.items, next_cursor: page.next_cursor, has_more: page.has_more } };
    },
  },
  {
    method: 'GET',
    path: '/{org}/webhook-targets/{id}',
    permission: 'admin',
    handler: async (ctx) => ({ status: 200, schema: 'webhookTarget', value: webhookTargetView(await reachableTarget(ctx)) }),
  },
  withBody(patchTargetBody, {
    method: 'PATCH',
    path: '/{org}/webhook-targets/{id}',
    permission: 'admin',
    actor: 'org',
    async handler(ctx) {
      const { body } = ctx;
      const input: UpdateTargetInput = await targetInput(ctx);
      if (body.url != null) {
        await checkTargetUrl(ctx, body.url);
        input.url = body.url;
      }
      if (body.name != null) input.name = body.name;
      if (body.events != null) input.events = body.events;
      if (body.repo_ids !== undefined) input.repo_ids = body.repo_ids;
      return callActor(ctx, orgActor(ctx.org.id), 'webhook.target.update', input);
    },
  }),
  {
    method: 'DELETE',
    path: '/{org}/webhook-targets/{id}',
    permission: 'admin',
    async handler(ctx) {
      return callActor(ctx, orgActor(ctx.org.id), 'webhook.target.delete', await targetInput(ctx));
    },
  },
  withBody(noBody, {
    method: 'POST',
    path: '/{org}/webhook-targets/{id}/rotate-secret',
    permission: 'admin',
    actor: 'org',
    async handler(ctx) {
      return callActor(ctx, orgActor(ctx.org.id), 'webhook.target.rotate-secret', await targetInput(ctx));
    },
  }),
  {
    method: 'GET',
    path: '/{org}/webhook-targets/{id}/deliveries',
    permission: 'admin',
    query: pageQuery,
    async handler(ctx) {
      const target = await reachableTarget(ctx);
      const cursor = decodeCursor(ctx.query.cursor, hasString('before'));
      const limit = ctx.query.limit as number;
      // One more than the page shows, to tell whether more follow: merged from every shard's log.
      const records = (await newestOf(ctx.services, deliveryLists(target.id), limit + 1, cursor?.before)).map(deliveryOfEntry);
      const page = cursorPage(records, limit, deliveryView);
      return { status: 200, schema: 'webhookDeliveryPage', value: { deliveries: page.items, next_cursor: page.next_cursor, has_more: page.has_more } };
    },
  },
  withBody(noBody, {
    method: 'POST',
    path: '/{org}/webhook-targets/{id}/deliveries/{deliveryId}/redeliver',
    permission: 'admin',
    actor: 'org',
    async handler(ctx) {
      const input: RedeliverInput = { ...(await targetInput(ctx)), delivery_id: ctx.params.deliveryId! };
      const original = await deliveryFromOwner(ctx, input.delivery_id);
      if (original !== undefined) input.original = original;
      const reply = await callActor(ctx, orgActor(ctx.org.id), 'webhook.redeliver', input);
      if ('json' in reply && reply.status === 201) {
        const created = JSON.parse(Buffer.from(reply.json).toString('utf8')) as { id: string };
        adoptWebhookDelivery(ctx.org.id, ctx.params.id!, created.id);
      }
      return reply;
    },
  }),
];
