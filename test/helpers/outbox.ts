import type { Database, Key } from 'lmdb';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { Ranges } from '../../src/storage/keys.js';
import type { EventEnvelope } from '../../src/storage/records.js';

/** Every event waiting in the outboxes of all shards, shard by shard (no API lists the outbox). */
export function outboxEvents(meta: Database<unknown, Key>): EventEnvelope[] {
  const events: EventEnvelope[] = [];
  for (let shard = 0; shard < SHARD_COUNT; shard++) for (const { value } of meta.getRange(Ranges.outbox(shard))) events.push(value as EventEnvelope);
  return events;
}
