import { Type } from '@sinclair/typebox';
import { Closed, Enum, Nullable } from './body-schema.js';
import { arr, nullable, obj, page, str, type JsonSchema } from './common.js';

/** Webhook shapes (API §11): targets, their one-time secret, the delivery log. */
export const WEBHOOK_EVENT_KINDS = [
  'repo.created',
  'repo.updated',
  'repo.deleted',
  'bookmark.created',
  'bookmark.deleted',
  'bookmark.moved',
  'bookmark.merged',
  'change.created',
  'change.evolved',
  'push',
  'sync.queued',
  'sync.in_progress',
  'sync.completed',
  'sync.failed',
] as const;

export type WebhookEventKind = (typeof WEBHOOK_EVENT_KINDS)[number];

const targetFields: Record<string, JsonSchema> = {
  id: str(),
  name: str(),
  url: str(),
  events: arr(str()),
  repo_ids: nullable(arr(str())),
  created_at: str(),
  updated_at: str(),
};

export const webhookTarget: JsonSchema = obj(targetFields);
/** The create response: the only place the secret ever appears besides rotate-secret. */
export const webhookTargetCreated: JsonSchema = obj({ ...targetFields, secret: str() });
export const webhookTargetPage = page('webhook_targets', webhookTarget);
export const webhookSecret: JsonSchema = obj({ secret: str() });

export const webhookDelivery: JsonSchema = obj({
  id: str(),
  event_id: str(),
  event_type: str(),
  status: str(),
  attempts: { type: 'integer' },
  last_status_code: nullable({ type: 'integer' }),
  last_error: nullable(str()),
  next_attempt_at: nullable(str()),
  redelivery_of: nullable(str()),
  created_at: str(),
});
export const webhookDeliveryPage = page('deliveries', webhookDelivery);

export const responses = { webhookTarget, webhookTargetCreated, webhookTargetPage, webhookSecret, webhookDelivery, webhookDeliveryPage };

// ---- request bodies ----

const url = Type.String({ minLength: 1, maxLength: 2048 });
const name = Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 256 })));
const events = Type.Optional(Nullable(Type.Array(Enum(WEBHOOK_EVENT_KINDS), { minItems: 1, maxItems: 64 })));
// The 1 MiB body limit bounds the list long before this does.
const repoIds = Type.Optional(Nullable(Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { minItems: 1, maxItems: 10_000 })));

export const createTargetBody = Closed({ url, name, events, repo_ids: repoIds });
export const patchTargetBody = Closed({ url: Type.Optional(Nullable(url)), name, events, repo_ids: repoIds });
/** rotate-secret and redeliver take no fields: an empty body or `{}`. */
export const noBody = Closed({});
