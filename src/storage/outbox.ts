import type { Database, Key } from 'lmdb';
import { K, Ranges } from './keys.js';
import type { EventEnvelope } from './records.js';
import { eventShard } from './shards.js';

/**
 * The outbox: events written with the mutation that caused them, until the webhook fan-out turns
 * them into deliveries. One per shard: an event is kept on the shard of the actor that wrote it
 * (its repository's, the org's for an org event), so that only that shard's owner drains it.
 * Ordered by event id (time-ordered), so the fan-out takes a shard's events in order.
 */
type Meta = Database<unknown, Key>;

export function putOutboxEvent(meta: Meta, event: EventEnvelope): void {
  meta.putSync(K.outbox(eventShard(event), event.id), event);
}

export function hasOutboxEvents(meta: Meta, shard: number): boolean {
  for (const _ of meta.getKeys({ ...Ranges.outbox(shard), limit: 1 })) return true;
  return false;
}

/** Takes (reads and removes, in the caller's write transaction) up to `limit` of the shard's oldest events. */
export function takeOutboxEvents(meta: Meta, shard: number, limit: number): EventEnvelope[] {
  const entries = [...meta.getRange({ ...Ranges.outbox(shard), limit })];
  for (const { key } of entries) meta.removeSync(key);
  return entries.map((e) => e.value as EventEnvelope);
}
