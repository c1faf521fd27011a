import type { Database, Key } from 'lmdb';
import { K, Ranges } from './keys.js';
import type { EventEnvelope } from './records.js';

/**
 * The outbox: events written with the mutation that caused them, until the webhook fan-out turns
 * them into deliveries. Ordered by event id (time-ordered), so the fan-out takes them in order.
 */
type Meta = Database<unknown, Key>;

export function putOutboxEvent(meta: Meta, event: EventEnvelope): void {
  meta.putSync(K.outbox(event.id), event);
}

export function hasOutboxEvents(meta: Meta): boolean {
  for (const _ of meta.getKeys({ ...Ranges.outbox(), limit: 1 })) return true;
  return false;
}

/** Takes (reads and removes, in the caller's write transaction) up to `limit` of the oldest events. */
export function takeOutboxEvents(meta: Meta, limit: number): EventEnvelope[] {
  const entries = [...meta.getRange({ ...Ranges.outbox(), limit })];
  for (const { key } of entries) meta.removeSync(key);
  return entries.map((e) => e.value as EventEnvelope);
}
