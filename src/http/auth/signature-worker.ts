/**
 * Worker entry of the signature pool: checks a batch of Ed25519 signatures and answers with one
 * byte per signature. It holds no key table; the front end names each key by its public `x`.
 */
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import { BACKGROUND_NICE, lowerThreadPriority } from '../../actors/thread-priority.js';
import type { SignatureBatch, SignatureResults } from './signature-pool.js';

// A flood of new tokens must not take the cores from cached reads and writes.
lowerThreadPriority(BACKGROUND_NICE);

/** Public keys imported once each; keys are never deleted, so a bound only guards memory. */
const MAX_KEYS = 10_000;
const keys = new Map<string, KeyObject>();

function publicKey(x: string): KeyObject {
  let key = keys.get(x);
  if (!key) {
    if (keys.size >= MAX_KEYS) keys.clear();
    key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
    keys.set(x, key);
  }
  return key;
}

function valid(x: string, signingInput: string, signature: string): boolean {
  try {
    // The signing input is ASCII (checked by the front end), so latin1 gives its exact bytes.
    return verify(null, Buffer.from(signingInput, 'latin1'), publicKey(x), Buffer.from(signature, 'base64url'));
  } catch {
    return false;
  }
}

parentPort!.on('message', (batch: SignatureBatch) => {
  const ok = new Uint8Array(batch.inputs.length);
  for (let i = 0; i < ok.length; i++) ok[i] = valid(batch.keys[i]!, batch.inputs[i]!, batch.signatures[i]!) ? 1 : 0;
  parentPort!.postMessage({ id: batch.id, ok } satisfies SignatureResults, [ok.buffer]);
});
