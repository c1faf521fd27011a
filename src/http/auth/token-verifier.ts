import { ServiceError } from '../../errors.js';
import type { OrgDirectory } from '../../storage/org-directory.js';
import type { OrgRecord, SigningKeyRecord } from '../../storage/records.js';
import { parseCompactToken, type CompactToken } from './compact-token.js';
import { expandScopes, intersect } from './permissions.js';
import type { AuthorClaim, Principal } from './principal.js';
import type { SignaturePool } from './signature-pool.js';
import { TokenCache } from './token-cache.js';

interface LoadedKey {
  record: SigningKeyRecord;
  org: OrgRecord;
  /** The record's `x` decoded once, as the table is built: libsodium takes the raw 32 bytes. */
  publicKey: Uint8Array;
}

type Claims = Record<string, unknown>;

/** A token checked in all but its signature, with the principal it would have now. */
interface Unsigned {
  parsed: CompactToken;
  key: LoadedKey;
  principal: Principal;
  /** The directory's version the checks used. */
  version: number;
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
 * Verifies EdDSA access tokens against the signing keys of the org directory (API §2). The key
 * table is held in memory and rebuilt whenever the directory's version moves — read once per turn
 * of the event loop, the freshest view this thread can have — so a key disabled, revoked or
 * narrowed by the CLI in another process takes effect on the very next request. Verified tokens are cached until `exp`, within a byte budget; the cache is
 * dropped with the table, so a cached token never outlives a change to its key.
 *
 * A token not in the cache is checked on the front end for everything but its signature
 * (structure, key, claims), and its signature on the signature pool's threads. While that check
 * runs, requests bearing the same token wait for it rather than start another. The table may
 * change meanwhile: the outcome is decided with the table current when the signature is known.
 */
export class TokenVerifier {
  private version = -1;
  private byId = new Map<string, LoadedKey>();
  private byX = new Map<string, LoadedKey>();
  /** Orgs by slug, of the keys in the table: a token's `iss` is looked up here, not in the directory. */
  private orgs = new Map<string, OrgRecord>();
  private cache = new TokenCache<CachedPrincipal>(CACHE_BUDGET_BYTES);
  private readonly inFlight = new Map<string, Promise<Principal>>();
  /** Requests now waiting for a signature check, those that joined another's check included. */
  waiting = 0;
  private versionRead = false;
  /** The clock in seconds, read with the version once per turn: a turn is far shorter than the skew allowed. */
  private turnSeconds = 0;
  private readonly forgetVersion = (): void => {
    this.versionRead = false;
  };
  private renewed = false;
  private readonly forgetRenewal = (): void => {
    this.renewed = false;
  };

  constructor(
    private readonly directory: OrgDirectory,
    private readonly options: VerifierOptions,
    private readonly signatures: SignaturePool,
  ) {}

  /**
   * Reads the directory's version once per turn of the event loop: the local directory serves
   * this thread the same LMDB snapshot until a timer renews it, so a second read in the same turn
   * cannot see more.
   */
  private refresh(): void {
    if (this.versionRead) return;
    this.versionRead = true;
    this.turnSeconds = Date.now() / 1000;
    setImmediate(this.forgetVersion);
    this.reload();
  }

  /**
   * The table from a snapshot renewed once this turn: the checks before a signature may have read
   * the view this thread still holds, and a fresh one sees a change the CLI committed meanwhile.
   * Every check that ends in this turn ended before it began, so one renewal serves them all (a
   * batch of results arrives at once; renewing per check cost 6 % of the front end's samples).
   */
  private freshTable(): void {
    if (this.renewed) return;
    this.renewed = true;
    setImmediate(this.forgetRenewal);
    this.directory.refresh();
    this.reload();
  }

  private reload(): void {
    const version = this.directory.version();
    if (version === this.version) return;
    const byId = new Map<string, LoadedKey>();
    const byX = new Map<string, LoadedKey>();
    const orgs = new Map<string, OrgRecord>();
    for (const record of this.directory.keys()) {
      const org = this.directory.org(record.org_id);
      if (!org) continue;
      const loaded = { record, org, publicKey: Buffer.from(record.public_jwk.x, 'base64url') };
      byId.set(record.id, loaded);
      byX.set(`${org.id}:${record.public_jwk.x}`, loaded);
      orgs.set(org.slug, org);
    }
    this.byId = byId;
    this.byX = byX;
    this.orgs = orgs;
    this.cache = new TokenCache(CACHE_BUDGET_BYTES);
    this.version = version;
  }

  /**
   * The principal of a token: at once when it was verified before and is still valid (no promise,
   * so a cached token costs the request nothing asynchronous), else once its signature is checked.
   * Everything but the signature is checked here and now: a token refused for its form, its key
   * or its claims is refused synchronously, without any crypto.
   */
  authenticate(authorization: string | undefined): Principal | Promise<Principal> {
    // Cached by the header as sent, not by the token cut out of it: uWS gives the header as a flat
    // string, which V8 compares in place, where a slice of it is compared in V8's runtime (git's
    // Basic header arrives here rewritten as a Bearer one). Spellings of one token ("bearer",
    // extra spaces) are entries of their own, each verified once, within the same byte budget.
    this.refresh();
    const cached = authorization ? this.cache.get(authorization) : undefined;
    if (cached) {
      if (cached.principal.exp + CLOCK_SKEW_S > this.turnSeconds) return cached.principal;
      this.cache.delete(authorization!);
    }
    const token = bearerToken(authorization);
    let pending = this.inFlight.get(token);
    if (!pending) {
      pending = this.verifySignature(authorization!, token, this.checkUnsigned(token));
      this.inFlight.set(token, pending);
      const settled = (): void => void this.inFlight.delete(token);
      pending.then(settled, settled);
    }
    this.waiting++;
    return pending.finally(() => this.waiting--);
  }

  private findKey(token: CompactToken): LoadedKey {
    const { header, claims } = token;
    if (typeof claims.iss !== 'string' || !claims.iss) throw unauthorized();
    // Looked up in memory, never as a storage key: an issuer of any length or form is simply no
    // org there. An org without keys is not in the table, and a token naming it has no key either way.
    const org = this.orgs.get(claims.iss);
    if (!org) throw unknownKey();
    let key: LoadedKey | undefined;
    const jwk = header.jwk as { x?: unknown } | undefined;
    if (typeof header.kid === 'string') key = this.byId.get(header.kid);
    else if (jwk && typeof jwk.x === 'string') key = this.byX.get(`${org.id}:${jwk.x}`);
    else throw unauthorized();
    if (!key || key.org.id !== org.id) throw unknownKey();
    return key;
  }

  private checkUnsigned(token: string): Unsigned {
    const parsed = parseCompactToken(token);
    if (!parsed) throw unauthorized();
    const key = this.findKey(parsed);
    this.checkClaims(parsed.claims);
    if (key.record.status !== 'active') throw unauthorized();
    return { parsed, key, principal: this.principal(key, parsed.claims), version: this.version };
  }

  private async verifySignature(authorization: string, token: string, { parsed, key, principal, version }: Unsigned): Promise<Principal> {
    if (!(await this.signatures.verify(key.publicKey, parsed.signingInput, parsed.signature))) throw unauthorized();
    this.freshTable();
    if (this.version !== version) {
      // The table moved while the signature was checked (a key disabled, revoked or narrowed):
      // the signature still proves who signed, but what the key may do now is the new table's.
      const now = this.findKey(parsed);
      if (now.record.public_jwk.x !== key.record.public_jwk.x || now.record.status !== 'active') throw unauthorized();
      principal = this.principal(now, parsed.claims);
    }
    // Into the cache of the table the principal was built from: the current one.
    this.cache.set(authorization, { principal, bytes: principalBytes(principal) });
    return principal;
  }

  /**
   * jose's rules for a JWT with `issuer`, `audience`, `requiredClaims: ['exp', 'iat']` and 30 s of
   * clock tolerance (`typ` and `sub` are not checked; `iss` named the key's org in `findKey`), then
   * the lifetime cap: a token issued in the future would stretch its lifetime.
   */
  private checkClaims(claims: Claims): void {
    for (const name of ['exp', 'iat', 'aud']) if (!Object.hasOwn(claims, name)) throw unauthorized();
    const aud = claims.aud;
    const audiences = this.options.audiences;
    if (typeof aud === 'string' ? !audiences.includes(aud) : !Array.isArray(aud) || !audiences.some((a) => aud.includes(a))) throw unauthorized();
    const { iat, nbf, exp } = claims;
    if (typeof iat !== 'number' || typeof exp !== 'number') throw unauthorized();
    const now = Math.floor(Date.now() / 1000);
    if (nbf !== undefined && (typeof nbf !== 'number' || nbf > now + CLOCK_SKEW_S)) throw unauthorized();
    if (exp <= now - CLOCK_SKEW_S) throw unauthorized();
    if (iat > Date.now() / 1000 + CLOCK_SKEW_S || exp - iat > this.options.maxTtlS) throw unauthorized();
  }

  private principal(key: LoadedKey, claims: Claims): Principal {
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
    const permissions = intersect(expandScopes(scopes), expandScopes(key.record.scopes));
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
      exp: claims.exp as number,
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
