import { createPublicKey, type KeyObject } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose';
import { ServiceError } from '../../errors.js';
import type { Storage } from '../../storage/database.js';
import { K, under } from '../../storage/keys.js';
import type { OrgRecord, SigningKeyRecord } from '../../storage/records.js';
import { getOrg, getOrgBySlug } from '../../storage/repo-store.js';
import { ORG_SLUG } from '../../protocol/names.js';
import { expandScopes, intersect } from './permissions.js';
import type { AuthorClaim, Principal } from './principal.js';
import { TokenCache } from './token-cache.js';

interface LoadedKey {
  record: SigningKeyRecord;
  org: OrgRecord;
  publicKey: KeyObject;
}

export interface VerifierOptions {
  audiences: string[];
  maxTtlS: number;
}

const CLOCK_SKEW_S = 30;
/**
 * Longest entry of `repos` (an org slug of 64, "/", a name of 100) or `repo_ids` accepted. Every
 * entry becomes part of a storage key when the restriction is resolved: a longer one names
 * nothing, and one of some kilobytes would not fit LMDB's keys.
 */
const MAX_RESTRICTION_ENTRY_CHARS = 200;
/** Longest accepted token: a compact JWS with a hundred authors and 250 repository ids fits in half of it. */
export const MAX_TOKEN_CHARS = 8 * 1024;
/** Memory the verified-token cache may hold: tens of thousands of typical tokens. */
const CACHE_BUDGET_BYTES = 16 * 1024 * 1024;
/** What a principal holds besides its claims' strings (sets, arrays, the message form), roughly. */
const PRINCIPAL_OVERHEAD = 600;

interface CachedPrincipal {
  principal: Principal;
  bytes: number;
}

const unauthorized = (): ServiceError => new ServiceError('UNAUTHORIZED', 'invalid access token');
const unknownKey = (): ServiceError => new ServiceError('JWT_UNKNOWN_PUBLIC_KEY', 'the token is signed by a key that is not registered for its issuer');

function bearerToken(authorization: string | undefined): string {
  const scheme = authorization?.slice(0, 7);
  if (!authorization || (scheme !== 'Bearer ' && scheme?.toLowerCase() !== 'bearer ')) throw unauthorized();
  const token = authorization.slice(7).trim();
  // Refused before any decoding: a token's size must not choose how much work or memory it gets.
  if (!token || token.length > MAX_TOKEN_CHARS) throw unauthorized();
  return token;
}

/**
 * Verifies EdDSA access tokens against the signing-key table (API §2). The table is held in
 * memory and reloaded whenever the key-version counter in LMDB moves — a ~1 µs read on every
 * request — so a key disabled, revoked or narrowed by the CLI in another process takes effect on
 * the very next request. Verified tokens are cached until `exp`, within a byte budget; the cache is
 * dropped with the table, so a cached token never outlives a change to its key.
 */
export class TokenVerifier {
  private version = -1;
  private byId = new Map<string, LoadedKey>();
  private byX = new Map<string, LoadedKey>();
  private cache = new TokenCache<CachedPrincipal>(CACHE_BUDGET_BYTES);

  constructor(
    private readonly storage: Storage,
    private readonly options: VerifierOptions,
  ) {}

  private refresh(): void {
    const version = (this.storage.meta.get(K.keyVersion()) as number | undefined) ?? 0;
    if (version === this.version) return;
    const byId = new Map<string, LoadedKey>();
    const byX = new Map<string, LoadedKey>();
    for (const { value } of this.storage.meta.getRange(under(['key']))) {
      const record = value as SigningKeyRecord;
      const org = getOrg(this.storage.meta, record.org_id);
      if (!org) continue;
      const loaded = { record, org, publicKey: createPublicKey({ key: { ...record.public_jwk }, format: 'jwk' }) };
      byId.set(record.id, loaded);
      byX.set(`${org.id}:${record.public_jwk.x}`, loaded);
    }
    this.byId = byId;
    this.byX = byX;
    this.cache = new TokenCache(CACHE_BUDGET_BYTES);
    this.version = version;
  }

  /**
   * The principal of a token verified before and still valid, or null when it must be verified
   * (`verify`). Synchronous, so a cached token costs the request no promise.
   */
  cached(authorization: string | undefined): Principal | null {
    const token = bearerToken(authorization);
    this.refresh();
    const cached = this.cache.get(token);
    if (!cached) return null;
    if (cached.principal.exp + CLOCK_SKEW_S > Date.now() / 1000) return cached.principal;
    this.cache.delete(token);
    return null;
  }

  async verify(authorization: string | undefined): Promise<Principal> {
    const cached = this.cached(authorization);
    if (cached) return cached;
    const token = bearerToken(authorization);
    // The map of the key table this verification used: if the table reloads meanwhile (a key was
    // revoked), the result lands in the discarded map, never in the new one.
    const cache = this.cache;
    const principal = await this.verifyUncached(token);
    cache.set(token, { principal, bytes: principalBytes(principal) });
    return principal;
  }

  private findKey(token: string): LoadedKey {
    let header: ReturnType<typeof decodeProtectedHeader>;
    let claims: JWTPayload;
    try {
      header = decodeProtectedHeader(token);
      claims = decodeJwt(token);
    } catch {
      throw unauthorized();
    }
    if (header.alg !== 'EdDSA' && header.alg !== 'Ed25519') throw unauthorized();
    if (typeof claims.iss !== 'string' || !claims.iss) throw unauthorized();
    // An issuer that is no slug names no org, and it is looked up only as one.
    if (claims.iss.length > 64 || !ORG_SLUG.test(claims.iss)) throw unknownKey();
    const org = getOrgBySlug(this.storage.meta, claims.iss);
    if (!org) throw unknownKey();
    let key: LoadedKey | undefined;
    if (typeof header.kid === 'string') key = this.byId.get(header.kid);
    else if (header.jwk && typeof header.jwk.x === 'string') key = this.byX.get(`${org.id}:${header.jwk.x}`);
    else throw unauthorized();
    if (!key || key.org.id !== org.id) throw unknownKey();
    return key;
  }

  private async verifyUncached(token: string): Promise<Principal> {
    const key = this.findKey(token);
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key.publicKey, {
        algorithms: ['EdDSA', 'Ed25519'],
        issuer: key.org.slug,
        audience: this.options.audiences,
        clockTolerance: CLOCK_SKEW_S,
        requiredClaims: ['exp', 'iat'],
      }));
    } catch {
      throw unauthorized();
    }
    const exp = payload.exp!;
    const iat = payload.iat!;
    // jose checks exp and nbf; a token issued in the future would stretch its lifetime cap.
    if (iat > Date.now() / 1000 + CLOCK_SKEW_S || exp - iat > this.options.maxTtlS) throw unauthorized();
    if (key.record.status !== 'active') throw unauthorized();
    return this.principal(key, payload);
  }

  private principal(key: LoadedKey, claims: JWTPayload): Principal {
    // A token that names no scopes claims nothing narrower than its key: it acts with the key's.
    const scopes = claims.scopes ?? key.record.scopes;
    if (!Array.isArray(scopes) || !scopes.every((s) => typeof s === 'string')) throw unauthorized();
    const { repos, repo_ids: repoIds } = claims as { repos?: unknown; repo_ids?: unknown };
    const hasRepos = repos !== undefined && repos !== null;
    const hasIds = repoIds !== undefined && repoIds !== null;
    if (hasRepos && hasIds) throw unauthorized();
    const entry = (r: unknown): boolean => typeof r === 'string' && r.length <= MAX_RESTRICTION_ENTRY_CHARS;
    if (hasRepos && (!Array.isArray(repos) || !repos.every(entry))) throw unauthorized();
    if (hasIds && (!Array.isArray(repoIds) || repoIds.length > 250 || !repoIds.every(entry))) throw unauthorized();
    const authors = parseAuthors(claims.author);
    const permissions = intersect(expandScopes(scopes as string[]), expandScopes(key.record.scopes));
    const repoNames = hasRepos
      ? (repos as string[]).map((r) => (r.includes('/') ? r : `${key.org.slug}/${r}`).toLowerCase())
      : null;
    return {
      org: key.org,
      key: key.record,
      permissions,
      repoNames,
      repoIds: hasIds ? (repoIds as string[]) : null,
      authors,
      exp: claims.exp!,
      msg: {
        orgId: key.org.id,
        orgSlug: key.org.slug,
        keyId: key.record.id,
        keyName: key.record.name,
        permissions: [...permissions],
        authors: (authors ?? []).map((a) => ({ name: a.name, email: a.email ?? '', hasEmail: a.email !== null })),
        restricted: false,
        allowedRepoIds: [],
      },
    };
  }
}

function principalBytes(p: Principal): number {
  let chars = 0;
  for (const name of p.repoNames ?? []) chars += name.length;
  for (const id of p.repoIds ?? []) chars += id.length;
  // Authors are held twice: as claims and in the message form.
  for (const a of p.authors ?? []) chars += 2 * (a.name.length + (a.email?.length ?? 0));
  return PRINCIPAL_OVERHEAD + 2 * chars;
}

/** The `author` claim: 1–100 `[name, email|null]` pairs (API §2). */
function parseAuthors(raw: unknown): AuthorClaim[] | null {
  if (raw === undefined || raw === null) return null;
  if (!Array.isArray(raw) || raw.length < 1 || raw.length > 100) throw unauthorized();
  return raw.map((pair) => {
    if (!Array.isArray(pair) || typeof pair[0] !== 'string' || !pair[0] || (pair[1] !== null && pair[1] !== undefined && typeof pair[1] !== 'string')) {
      throw unauthorized();
    }
    return { name: pair[0], email: (pair[1] as string | null | undefined) ?? null };
  });
}
