import type { Key } from 'lmdb';
import type { Storage } from './database.js';
import { K } from './keys.js';
import type { RecordReader } from './read/record-cache.js';
import type { SecretBox } from './secret-box.js';

/**
 * Stored outcomes of requests that carried an `Idempotency-Key` (API §1), per signing key, kept
 * 24 h. A record lives on the shard of the actor that ran the request, written in that actor's
 * batch, so it moves with the shard. The response body is sealed at rest: some responses carry
 * secrets shown once (a webhook target's signing secret), and a replay must not turn the database
 * into a second copy of them.
 */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

interface StoredOutcome {
  fingerprint: string;
  status: number;
  sealed_body: string;
  at: number;
}

export interface IdempotentOutcome {
  fingerprint: string;
  status: number;
  body: string;
}

/** Where a key's outcome would be on each of `shards` (what a cluster reads from their owners). */
export function outcomeKeys(shards: readonly number[], keyId: string, key: string): Key[] {
  return shards.map((shard) => K.idempotency(shard, keyId, key));
}

export function loadOutcome(reader: RecordReader, secrets: SecretBox, shard: number, keyId: string, key: string, now: number): IdempotentOutcome | undefined {
  return read(reader, secrets, K.idempotency(shard, keyId, key), now);
}

/**
 * A record written before records moved into shards (its actor is unknown, so it cannot be moved).
 * Read as a fallback rather than dropped: a client retrying across the upgrade must still get its
 * replay, and every such record expires within 24 h of the upgrade, when this read finds nothing.
 */
export function loadLegacyOutcome(storage: Storage, secrets: SecretBox, keyId: string, key: string, now: number): IdempotentOutcome | undefined {
  return read(storage.meta, secrets, K.legacyIdempotency(keyId, key), now);
}

function read(reader: RecordReader, secrets: SecretBox, dbKey: Key, now: number): IdempotentOutcome | undefined {
  const stored = reader.get(dbKey) as StoredOutcome | undefined;
  if (!stored || now - stored.at >= IDEMPOTENCY_TTL_MS) return undefined;
  return { fingerprint: stored.fingerprint, status: stored.status, body: secrets.open(stored.sealed_body) };
}

/** Writes in the caller's transaction (the command's batch, on `shard`), so it commits with the mutation. */
export function saveOutcome(storage: Storage, secrets: SecretBox, shard: number, keyId: string, key: string, outcome: IdempotentOutcome, now: number): void {
  const stored: StoredOutcome = { fingerprint: outcome.fingerprint, status: outcome.status, sealed_body: secrets.seal(outcome.body), at: now };
  storage.meta.putSync(K.idempotency(shard, keyId, key), stored);
}
