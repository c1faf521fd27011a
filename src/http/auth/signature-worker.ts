/**
 * Worker entry of the signature pool: checks a batch of Ed25519 signatures with libsodium and
 * answers with one byte per signature. It holds no key table: each record carries its key.
 */
import sodium from 'sodium-native';
import { parentPort } from 'node:worker_threads';
import { BACKGROUND_NICE, lowerThreadPriority } from '../../actors/thread-priority.js';
import { forEachCheck, type SignatureBatch, type SignatureResults } from './signature-batch.js';

// A flood of new tokens must not take the cores from cached reads and writes.
lowerThreadPriority(BACKGROUND_NICE);

parentPort!.on('message', (batch: SignatureBatch) => {
  const ok = new Uint8Array(batch.ends.length);
  forEachCheck(batch, (publicKey, signature, message, i) => {
    ok[i] = sodium.crypto_sign_verify_detached(signature, message, publicKey) ? 1 : 0;
  });
  parentPort!.postMessage({ id: batch.id, ok } satisfies SignatureResults, [ok.buffer]);
});
