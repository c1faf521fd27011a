import type { Storage } from './database.js';
import { K } from './keys.js';
import type { SecretBox } from './secret-box.js';

/**
 * Stored outcomes of requests that carried an `Idempotency-Key` (API §1), per signing key, kept
 * 24 h. The response body is sealed at rest: some responses carry secrets shown once (a webhook
 * target's signing secret), and a replay must not turn the database into a second copy of them.
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

export function loadOutcome(storage: Storage, secrets: SecretBox, keyId: string, key: string, now: number): IdempotentOutcome | undefined {
  const stored = storage.meta.get(K.idempotency(keyId, key)) as StoredOutcome | undefined;
  if (!stored || now - stored.at >= IDEMPOTENCY_TTL_MS) return undefined;
  return { fingerprint: stored.fingerprint, status: stored.status, body: secrets.open(stored.sealed_body) };
}

/** Writes in the caller's transaction (the command's batch), so it commits with the mutation. */
export function saveOutcome(storage: Storage, secrets: SecretBox, keyId: string, key: string, outcome: IdempotentOutcome, now: number): void {
  const stored: StoredOutcome = { fingerprint: outcome.fingerprint, status: outcome.status, sealed_body: secrets.seal(outcome.body), at: now };
  storage.meta.putSync(K.idempotency(keyId, key), stored);
}
