/**
 * Access tokens as API.md §2 defines them: EdDSA JWTs signed locally with an org signing key.
 * Used by the orchestrator (one token per scenario) and by the generator (`read/fresh-token`
 * signs one per request, which is the point of that variant: the server cannot hit its cache).
 */
import sodium from 'sodium-native';
import { decodeJwt } from 'jose';
import type { JWK } from 'jose';

/** What it takes to sign: the `key create --json` output, trimmed to what tokens need. */
export interface SigningKey {
  kid: string;
  org: string;
  privateJwk: JWK;
}

export type TokenSigner = (scopes?: readonly string[]) => Promise<string>;

const base64url = (json: unknown): string => Buffer.from(JSON.stringify(json)).toString('base64url');

/**
 * Signs with libsodium: the generator shares the cores with the server, so what it spends per
 * token `read/fresh-token` charges to the server. jose's generic path took ≈ 100 µs a token here,
 * node:crypto (OpenSSL) 35 µs, libsodium 18 µs. The tokens are the same compact JWS jose makes.
 */
export async function createSigner(key: SigningKey, ttlSec = 3600): Promise<TokenSigner> {
  // The key pair is derived once from the JWK's `d` (the RFC 8032 seed): per token it would dominate.
  if (typeof key.privateJwk.d !== 'string') throw new Error('the signing key has no private part (d)');
  const publicKey = Buffer.alloc(sodium.crypto_sign_PUBLICKEYBYTES);
  const secretKey = Buffer.alloc(sodium.crypto_sign_SECRETKEYBYTES);
  sodium.crypto_sign_seed_keypair(publicKey, secretKey, Buffer.from(key.privateJwk.d, 'base64url'));
  const header = base64url({ alg: 'EdDSA', kid: key.kid });
  let counter = 0;
  return async (scopes = ['admin']) => {
    const iat = Math.floor(Date.now() / 1000);
    // A unique jti keeps two tokens minted in the same second distinct (the server caches by token).
    const claims = { scopes: [...scopes], iss: key.org, aud: 'repohost', iat, exp: iat + ttlSec, jti: `bench-${process.pid}-${++counter}` };
    const input = `${header}.${base64url(claims)}`;
    const signature = Buffer.allocUnsafe(sodium.crypto_sign_BYTES);
    sodium.crypto_sign_detached(signature, Buffer.from(input), secretKey);
    return `${input}.${signature.toString('base64url')}`;
  };
}

/** The org a token was issued for (`iss`), for `--url … --token …` runs. */
export function tokenOrg(token: string): string {
  const iss = decodeJwt(token).iss;
  if (!iss) throw new Error('--token has no iss claim: cannot tell which org to use');
  return iss;
}
