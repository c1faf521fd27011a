import type { DeliveryRecord, WebhookTargetRecord } from '../../storage/webhook-store.js';

/** Webhook records as the API shows them (API §11.1, §11.4). The sealed secret never appears. */
export interface WebhookTargetView {
  id: string;
  name: string;
  url: string;
  events: string[];
  repo_ids: string[] | null;
  created_at: string;
  updated_at: string;
}

export function webhookTargetView(t: WebhookTargetRecord): WebhookTargetView {
  return { id: t.id, name: t.name, url: t.url, events: t.events, repo_ids: t.repo_ids, created_at: t.created_at, updated_at: t.updated_at };
}

/** A delivery as the log shows it: the record without its routing fields and the sent body. */
export type DeliveryView = Omit<DeliveryRecord, 'org_id' | 'target_id' | 'repo_id' | 'body'>;

export function deliveryView(d: DeliveryRecord): DeliveryView {
  return {
    id: d.id,
    event_id: d.event_id,
    event_type: d.event_type,
    status: d.status,
    attempts: d.attempts,
    last_status_code: d.last_status_code,
    last_error: d.last_error,
    next_attempt_at: d.next_attempt_at,
    redelivery_of: d.redelivery_of,
    created_at: d.created_at,
  };
}
