import { generateKeyPairSync } from 'node:crypto';
import { invalid } from '../errors.js';
import { checkOrgSlug, checkTagKeys } from '../protocol/names.js';
import { isScopeName } from '../http/auth/permissions.js';
import type { Storage } from './database.js';
import { newId } from './ids.js';
import type { OrgDirectory } from './org-directory.js';
import type { KeyStatus, OrgRecord, PublicJwk, SigningKeyRecord } from './records.js';
import { getRepoByName } from './repo-store.js';

/**
 * Operator writes made by the CLI (orgs and signing keys): checked here, committed through the
 * org directory, which every server reading it notices by its version on the next request.
 */
export function createOrg(directory: OrgDirectory, slug: string, name?: string): OrgRecord {
  checkOrgSlug(slug);
  const org: OrgRecord = { id: newId('org'), slug, name: name || slug, created_at: new Date().toISOString() };
  directory.createOrg(org);
  return org;
}

export interface CreatedKey {
  record: SigningKeyRecord;
  privateKeyPem: string;
  privateKeyJwk: Record<string, string>;
}

/**
 * A new key of the org. `repos` names repositories of the org (`name` or `org/name`), looked up
 * in `storage`: the key is restricted to their ids.
 */
export function createSigningKey(directory: OrgDirectory, storage: Storage, orgSlug: string, opts: { scopes: string[]; repos?: string[]; name?: string }): CreatedKey {
  const org = directory.orgBySlug(orgSlug);
  if (!org) throw invalid(`organization "${orgSlug}" does not exist`);
  if (opts.scopes.length === 0) throw invalid('a key needs at least one scope');
  for (const s of opts.scopes) if (!isScopeName(s)) throw invalid(`unknown scope "${s}"`);
  const name = opts.name || `key-${new Date().toISOString().slice(0, 10)}`;
  if (name.length > 128) throw invalid('key name must be 1 to 128 characters');
  let repoIds: string[] | null = null;
  if (opts.repos && opts.repos.length) {
    repoIds = opts.repos.map((r) => {
      const slash = r.indexOf('/');
      if (slash >= 0 && r.slice(0, slash) !== org.slug) throw invalid(`repository "${r}" is not in ${org.slug}: a key reaches only its own org`);
      const repo = getRepoByName(storage.meta, org.id, r.slice(slash + 1));
      if (!repo) throw invalid(`repository "${r}" does not exist in ${org.slug}`);
      return repo.id;
    });
  }
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const jwk = publicKey.export({ format: 'jwk' }) as { x: string };
  const publicJwk: PublicJwk = { kty: 'OKP', crv: 'Ed25519', x: jwk.x };
  const record: SigningKeyRecord = {
    id: newId('key'),
    org_id: org.id,
    name,
    scopes: opts.scopes,
    repo_ids: repoIds,
    tags: {},
    status: 'active',
    created_at: new Date().toISOString(),
    revoked_at: null,
    public_jwk: publicJwk,
  };
  directory.createKey(record);
  return {
    record,
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    privateKeyJwk: privateKey.export({ format: 'jwk' }) as Record<string, string>,
  };
}

export function setKeyStatus(directory: OrgDirectory, keyId: string, status: KeyStatus): SigningKeyRecord {
  return directory.updateKey(keyId, (rec) => {
    if (rec.status === 'revoked') throw invalid('the key is revoked; revoking is final');
    rec.status = status;
    if (status === 'revoked') rec.revoked_at = new Date().toISOString();
  });
}

export function setKeyScopes(directory: OrgDirectory, keyId: string, scopes: string[]): SigningKeyRecord {
  for (const s of scopes) if (!isScopeName(s)) throw invalid(`unknown scope "${s}"`);
  return directory.updateKey(keyId, (rec) => {
    rec.scopes = scopes;
  });
}

/** `k=v` sets, `k=` removes (API §13). */
export function setKeyTags(directory: OrgDirectory, keyId: string, pairs: Record<string, string>): SigningKeyRecord {
  checkTagKeys(pairs);
  return directory.updateKey(keyId, (rec) => {
    const tags = { ...rec.tags };
    for (const [k, v] of Object.entries(pairs)) {
      if (v === '') delete tags[k];
      else tags[k] = v;
    }
    rec.tags = tags;
  });
}
