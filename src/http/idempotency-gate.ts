import { createHash } from 'node:crypto';
import { ServiceError } from '../errors.js';
import type { Storage } from '../storage/database.js';
import { loadOutcome } from '../storage/idempotency-store.js';
import type { SecretBox } from '../storage/secret-box.js';
import type { Reply, RequestContext } from './route.js';

type Idempotency = NonNullable<RequestContext['idempotency']>;

/**
 * The front end's side of an Idempotency-Key (API §1): the request's fingerprint (same route, same
 * body), and one request per key at a time. A repeat that arrives while the first is still running
 * waits for it; a repeat of a finished one replays its stored response. A streamed body is
 * compared by the actor, inside its transaction, once the body has been read (mailbox.ts).
 */
export class IdempotencyGate {
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(
    private readonly storage: Storage,
    private readonly secrets: SecretBox,
  ) {}

  /**
   * Runs `handler` as the only request under `keyId`'s `key`, or replays that key's outcome.
   * `missing` is thrown when the request would run (its repository is gone), not when it replays.
   */
  async run(
    keyId: string,
    key: string,
    request: { method: string; path: string; raw: Buffer | null; stream: AsyncIterable<Uint8Array> | null },
    missing: ServiceError | null,
    handler: (idempotency: Idempotency, stream: AsyncIterable<Uint8Array> | null) => Reply | Promise<Reply>,
  ): Promise<Reply> {
    let { stream } = request;
    let idempotency: Idempotency;
    if (stream) {
      const hashed = fingerprintStream(request.method, request.path, stream);
      stream = hashed.stream;
      idempotency = {
        key,
        get fingerprint() {
          return hashed.fingerprint();
        },
      };
    } else {
      idempotency = { key, fingerprint: requestFingerprint(request.method, request.path, request.raw ?? '') };
    }
    const slot = `${keyId}\0${key}`;
    while (this.inFlight.has(slot)) await this.inFlight.get(slot);
    if (!stream) {
      const prior = loadOutcome(this.storage, this.secrets, keyId, key, Date.now());
      if (prior) {
        if (prior.fingerprint !== idempotency.fingerprint) throw new ServiceError('ABORTED', 'Idempotency-Key was already used with a different request');
        return { status: prior.status, json: prior.body };
      }
    }
    if (missing) throw missing;
    let release!: () => void;
    this.inFlight.set(slot, new Promise<void>((resolve) => (release = resolve)));
    try {
      return await handler(idempotency, stream);
    } finally {
      this.inFlight.delete(slot);
      release();
    }
  }
}

/** Fingerprint of a request for idempotency: same route, same body. */
export function requestFingerprint(method: string, path: string, body: Uint8Array | string): string {
  return createHash('sha256').update(method).update('\0').update(path).update('\0').update(body).digest('base64url');
}

/**
 * The same fingerprint for a body that streams through: `stream` hashes each piece as its consumer
 * reads it; `fingerprint()` covers what has been read (the whole body once the consumer is done).
 */
function fingerprintStream(method: string, path: string, body: AsyncIterable<Uint8Array>): { stream: AsyncIterable<Uint8Array>; fingerprint(): string } {
  const hash = createHash('sha256').update(method).update('\0').update(path).update('\0');
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
    fingerprint() {
      digest ??= hash.digest('base64url');
      return digest;
    },
  };
}
