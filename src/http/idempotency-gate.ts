import { createHash, type Hash } from 'node:crypto';
import { keyReused, type ServiceError } from '../errors.js';
import { loadLegacyOutcome, loadOutcome, outcomeKeys, type IdempotentOutcome } from '../storage/idempotency-store.js';
import type { Services } from './services.js';
import { readerFor } from './shard-reads.js';
import type { IdempotencyTarget } from './idempotency-target.js';
import type { Reply, RequestContext } from './route.js';

type Idempotency = NonNullable<RequestContext['idempotency']>;

/**
 * The front end's side of an Idempotency-Key (API §1): the request's fingerprint (same route, same
 * body), and one request per key at a time. A repeat that arrives while the first is still running
 * waits for it; a repeat of a finished one replays its stored response, found on the shard of the
 * actor that ran it (idempotency-target.ts). A streamed body is fingerprinted as the handler reads
 * it, and the actor compares it inside its transaction (mailbox.ts); when a record is found first,
 * the body is read here to compare.
 */
export class IdempotencyGate {
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(private readonly services: Pick<Services, 'storage' | 'secrets' | 'shardReads'>) {}

  /**
   * Runs `handler` as the only request under `keyId`'s `key`, or replays that key's outcome.
   * `missing` is thrown when the request would run (its repository is gone), not when it replays.
   */
  async run(
    keyId: string,
    key: string,
    request: { method: string; path: string; reach: string; raw: Buffer | null; stream: AsyncIterable<Uint8Array> | null },
    target: IdempotencyTarget,
    missing: ServiceError | null,
    handler: (idempotency: Idempotency, stream: AsyncIterable<Uint8Array> | null) => Reply | Promise<Reply>,
  ): Promise<Reply> {
    let stream: AsyncIterable<Uint8Array> | null = null;
    let fingerprint: () => string;
    if (request.stream) {
      const hashed = fingerprintStream(request.method, request.path, request.reach, request.stream);
      stream = hashed.stream;
      fingerprint = hashed.fingerprint;
    } else {
      const whole = requestFingerprint(request.method, request.path, request.raw ?? '', request.reach);
      fingerprint = () => whole;
    }
    const slot = `${keyId}\0${key}`;
    while (this.inFlight.has(slot)) await this.inFlight.get(slot);
    // Held from the lookup on: in a cluster the lookup may wait for another node.
    let release!: () => void;
    this.inFlight.set(slot, new Promise<void>((resolve) => (release = resolve)));
    try {
      const prior = await this.stored(keyId, key, target, Date.now());
      if (prior) {
        if (stream) await drain(stream);
        if (prior.fingerprint !== fingerprint()) throw keyReused();
        return { status: prior.status, json: prior.body };
      }
      if (missing) throw missing;
      const idempotency: Idempotency = {
        key,
        actor: target.actor!,
        get fingerprint() {
          return fingerprint();
        },
      };
      return await handler(idempotency, stream);
    } finally {
      this.inFlight.delete(slot);
      release();
    }
  }

  /**
   * The key's record on the shards that may hold it (read from their owners in a cluster: a
   * repeated rename's record is on the repository's shard, which the org's owner may not hold),
   * or where it was kept before shards (idempotency-store.ts).
   */
  private async stored(keyId: string, key: string, target: IdempotencyTarget, now: number): Promise<IdempotentOutcome | undefined> {
    const shards = target.shards(now);
    const reader = await readerFor(this.services, () => outcomeKeys(shards, keyId, key));
    for (const shard of shards) {
      const found = loadOutcome(reader, this.services.secrets, shard, keyId, key, now);
      if (found) return found;
    }
    return loadLegacyOutcome(this.services.storage, this.services.secrets, keyId, key, now);
  }
}

/** Reads a body to its end (a replayed request's body only matters for its fingerprint). */
async function drain(body: AsyncIterable<Uint8Array>): Promise<void> {
  const pieces = body[Symbol.asyncIterator]();
  while (!(await pieces.next()).done);
}

/**
 * The start of a request's fingerprint: the route, and the token's own narrowing of its key's
 * repositories when it has one (`reach`, see app.ts), so that a stored response is replayed only
 * to a token that reaches what the one that made it reached. An unnarrowed token adds nothing, so
 * its fingerprints are those of records stored before `reach` was part of them.
 */
function fingerprintHash(method: string, path: string, reach: string): Hash {
  const hash = createHash('sha256').update(method).update('\0').update(path).update('\0');
  return reach ? hash.update('\x01').update(reach).update('\0') : hash;
}

/** Fingerprint of a request for idempotency: same route, same body, a token of the same reach. */
export function requestFingerprint(method: string, path: string, body: Uint8Array | string, reach = ''): string {
  return fingerprintHash(method, path, reach).update(body).digest('base64url');
}

/**
 * The same fingerprint for a body that streams through: `stream` hashes each piece as its consumer
 * reads it; `fingerprint()` covers what has been read (the whole body once the consumer is done).
 */
function fingerprintStream(method: string, path: string, reach: string, body: AsyncIterable<Uint8Array>): { stream: AsyncIterable<Uint8Array>; fingerprint: () => string } {
  const hash = fingerprintHash(method, path, reach);
  let digest: string | null = null;
  return {
    stream: {
      async *[Symbol.asyncIterator]() {
        for await (const piece of body) {
          if (digest === null) hash.update(piece);
          yield piece;
        }
      },
    },
    fingerprint: () => (digest ??= hash.digest('base64url')),
  };
}
