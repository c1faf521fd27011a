/**
 * Access tokens as API.md §2 defines them: EdDSA JWTs signed locally with an org signing key.
 * Used by the orchestrator (one token per scenario) and by the generator (`read/fresh-token`
 * signs one per request, which is the point of that variant: the server cannot hit its cache).
 */
import { createPrivateKey, sign } from 'node:crypto';
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
 * Signs with node:crypto directly: the generator shares the cores with the server, and jose's
 * generic path cost it twice the CPU per token (≈ 100 against ≈ 50 µs here), which
 * `read/fresh-token` charged to the server. The tokens are the same compact JWS jose makes.
 */
export async function createSigner(key: SigningKey, ttlSec = 3600): Promise<TokenSigner> {
  // Import once: importing per token would dominate the generator's cost.
  const privateKey = createPrivateKey({ key: key.privateJwk as Record<string, string>, format: 'jwk' });
  const header = base64url({ alg: 'EdDSA', kid: key.kid });
  let counter = 0;
  return async (scopes = ['admin']) => {
    const iat = Math.floor(Date.now() / 1000);
    // A unique jti keeps two tokens minted in the same second distinct (the server caches by token).
    const claims = { scopes: [...scopes], iss: key.org, aud: 'repohost', iat, exp: iat + ttlSec, jti: `bench-${process.pid}-${++counter}` };
    const input = `${header}.${base64url(claims)}`;
    return `${input}.${sign(null, Buffer.from(input), privateKey).toString('base64url')}`;
  };
}

/** The org a token was issued for (`iss`), for `--url … --token …` runs. */
export function tokenOrg(token: string): string {
  const iss = decodeJwt(token).iss;
  if (!iss) throw new Error('--token has no iss claim: cannot tell which org to use');
  return iss;
}
