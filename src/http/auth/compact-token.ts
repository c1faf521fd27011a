/**
 * The structure of an EdDSA access token in JWS compact serialization (RFC 7515 §7.1), checked
 * before any signature work: a token that fails here costs the front end a few string scans and
 * two small JSON parses, never a verification.
 */
import { SIGNATURE_CHARS } from './signature-batch.js';

/** What a structurally sound token holds; the signature is still unchecked. */
export interface CompactToken {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
  /** `header.payload` as sent: the bytes the signature covers (ASCII, by the alphabet check). */
  signingInput: string;
  /** The signature part, base64url. */
  signature: string;
}

/** Base64url without padding or whitespace, as RFC 7515 §2 requires of every part. */
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** Invalid UTF-8 is refused, not replaced, as jose's decoder does. */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** A JSON object (not an array, not null) from one base64url part, or null. */
function decodeObject(part: string): Record<string, unknown> | null {
  // A length of 4n+1 is not base64 at all (jose's decoder refuses it; Buffer would drop the rest).
  if (part.length % 4 === 1 || !BASE64URL.test(part)) return null;
  let value: unknown;
  try {
    value = JSON.parse(strictUtf8.decode(Buffer.from(part, 'base64url')));
  } catch {
    return null;
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

/**
 * Parses a compact JWS whose header asks for EdDSA, or returns null when it is not one. The
 * header rules are those jose applies to a JWT: `alg` is `EdDSA` or `Ed25519`; `crit` may only
 * name `b64`, which must then be `true` (a JWT's payload is always encoded).
 */
export function parseCompactToken(token: string): CompactToken | null {
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first < 0 || second < 0 || token.indexOf('.', second + 1) >= 0) return null;
  const signature = token.slice(second + 1);
  if (signature.length !== SIGNATURE_CHARS || !BASE64URL.test(signature)) return null;
  const header = decodeObject(token.slice(0, first));
  if (!header || (header.alg !== 'EdDSA' && header.alg !== 'Ed25519')) return null;
  if (header.crit !== undefined) {
    const crit = header.crit;
    if (!Array.isArray(crit) || crit.length === 0 || !crit.every((name) => name === 'b64') || header.b64 !== true) return null;
  }
  const claims = decodeObject(token.slice(first + 1, second));
  if (!claims) return null;
  return { header, claims, signingInput: token.slice(0, second), signature };
}
