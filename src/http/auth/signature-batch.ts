/**
 * The messages between the front end and a signature thread. A batch travels as one buffer whose
 * memory moves to the thread with the message (no copy, no structured clone of a string per
 * token), and the thread hands libsodium views into it.
 */

/** An Ed25519 public key, as libsodium takes it: the 32 bytes of the JWK's `x`. */
export const PUBLIC_KEY_BYTES = 32;
/** An Ed25519 signature: 64 bytes. */
export const SIGNATURE_BYTES = 64;
/** The same in base64url without padding, as a token carries it. */
export const SIGNATURE_CHARS = 86;
/** The fixed part of a record: the key, then the signature; the signed bytes follow. */
const RECORD_HEAD = PUBLIC_KEY_BYTES + SIGNATURE_BYTES;

/** One signature to check. */
export interface SignatureCheck {
  publicKey: Uint8Array;
  /** `header.payload` of the token; ASCII (checked by the front end), so one byte a character. */
  signingInput: string;
  /** base64url, `SIGNATURE_CHARS` long. */
  signature: string;
}

/** One message to a thread. */
export interface SignatureBatch {
  id: number;
  /** One record per check, back to back. */
  data: Uint8Array<ArrayBuffer>;
  /** Where each record ends in `data`. */
  ends: Uint32Array<ArrayBuffer>;
}

/** A thread's answer: `ok[i]` is 1 when signature i is valid. */
export interface SignatureResults {
  id: number;
  ok: Uint8Array;
}

export function packBatch(id: number, checks: readonly SignatureCheck[]): SignatureBatch {
  let size = 0;
  for (const check of checks) size += RECORD_HEAD + check.signingInput.length;
  // Not a slice of Buffer's shared pool: the whole memory is transferred with the message.
  const data = Buffer.allocUnsafeSlow(size);
  const ends = new Uint32Array(checks.length);
  let at = 0;
  checks.forEach((check, i) => {
    data.set(check.publicKey, at);
    data.write(check.signature, at + PUBLIC_KEY_BYTES, SIGNATURE_BYTES, 'base64url');
    at += RECORD_HEAD;
    at += data.write(check.signingInput, at, 'latin1');
    ends[i] = at;
  });
  return { id, data, ends };
}

/** Calls `visit` with views of each record's key, signature and signed bytes, in order. */
export function forEachCheck(batch: SignatureBatch, visit: (publicKey: Uint8Array, signature: Uint8Array, message: Uint8Array, i: number) => void): void {
  const { data, ends } = batch;
  let start = 0;
  for (let i = 0; i < ends.length; i++) {
    const end = ends[i]!;
    visit(data.subarray(start, start + PUBLIC_KEY_BYTES), data.subarray(start + PUBLIC_KEY_BYTES, start + RECORD_HEAD), data.subarray(start + RECORD_HEAD, end), i);
    start = end;
  }
}
