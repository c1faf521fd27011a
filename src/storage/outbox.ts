import type { Database, Key } from 'lmdb';
import { K, lastPart, Ranges } from './keys.js';
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

/** The id of the shard's newest event in the outbox, undefined when it is empty. */
export function lastOutboxEvent(meta: Meta, shard: number): string | undefined {
  const range = Ranges.outbox(shard);
  for (const key of meta.getKeys({ start: range.end, end: range.start, reverse: true, limit: 1 })) return lastPart(key);
  return undefined;
}

/**
 * Reads (without taking) up to `limit` of the shard's events after event `after` (from the oldest
 * when undefined), none newer than event `through`.
 */
export function peekOutboxEvents(meta: Meta, shard: number, after: string | undefined, limit: number, through: string): EventEnvelope[] {
  const range = Ranges.outbox(shard);
  const events: EventEnvelope[] = [];
  for (const { key, value } of meta.getRange({ start: after === undefined ? range.start : K.outbox(shard, after), end: range.end })) {
    const id = lastPart(key);
    if (id === after) continue;
    if (id > through || events.length === limit) break;
    events.push(value as EventEnvelope);
  }
  return events;
}

/**
 * Takes (reads and removes, in the caller's write transaction) up to `limit` of the shard's oldest
 * events, none newer than event `through`.
 */
export function takeOutboxEvents(meta: Meta, shard: number, limit: number, through: string): EventEnvelope[] {
  const events: EventEnvelope[] = [];
  for (const { key, value } of meta.getRange({ ...Ranges.outbox(shard), limit })) {
    if (lastPart(key) > through) break;
    meta.removeSync(key);
    events.push(value as EventEnvelope);
  }
  return events;
}
