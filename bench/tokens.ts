/**
 * Access tokens as API.md §2 defines them: EdDSA JWTs signed locally with an org signing key.
 * Used by the orchestrator (one token per scenario) and by the generator (`read/fresh-token`
 * signs one per request, which is the point of that variant: the server cannot hit its cache).
 */
import { SignJWT, importJWK, decodeJwt } from 'jose';
import type { JWK } from 'jose';

/** What it takes to sign: the `key create --json` output, trimmed to what tokens need. */
export interface SigningKey {
  kid: string;
  org: string;
  privateJwk: JWK;
}

export type TokenSigner = (scopes?: readonly string[]) => Promise<string>;

export async function createSigner(key: SigningKey, ttlSec = 3600): Promise<TokenSigner> {
  // Import once: importing per token would dominate the generator's cost.
  const privateKey = await importJWK(key.privateJwk, 'EdDSA');
  let counter = 0;
  return (scopes = ['admin']) =>
    new SignJWT({ scopes: [...scopes] })
      .setProtectedHeader({ alg: 'EdDSA', kid: key.kid })
      .setIssuer(key.org)
      .setAudience('repohost')
      .setIssuedAt()
      .setExpirationTime(`${ttlSec}s`)
      // A unique jti keeps two tokens minted in the same second distinct (the server caches by token).
      .setJti(`bench-${process.pid}-${++counter}`)
      .sign(privateKey);
}

/** The org a token was issued for (`iss`), for `--url … --token …` runs. */
export function tokenOrg(token: string): string {
  const iss = decodeJwt(token).iss;
  if (!iss) throw new Error('--token has no iss claim: cannot tell which org to use');
  return iss;
}
