import { generateKeyPairSync } from 'node:crypto';
import { ServiceError, invalid } from '../errors.js';
import { checkOrgSlug, checkTagKeys } from '../protocol/names.js';
import { isScopeName } from '../http/auth/permissions.js';
import type { Storage } from './database.js';
import { newId } from './ids.js';
import { K } from './keys.js';
import type { KeyStatus, OrgRecord, PublicJwk, SigningKeyRecord } from './records.js';
import { getOrgBySlug, getRepoByName, getSigningKey, signingKeyVersion } from './repo-store.js';

/**
 * Operator writes made by the CLI (orgs and signing keys). They run in the CLI's own process,
 * possibly while a server uses the same data directory; every key change bumps the key-table
 * version counter in the same transaction, which the server checks on every request.
 */
export function createOrg(storage: Storage, slug: string, name?: string): OrgRecord {
  checkOrgSlug(slug);
  return storage.root.transactionSync(() => {
    if (storage.meta.get(K.orgSlug(slug))) throw new ServiceError('INVALID_REQUEST', `organization "${slug}" already exists`);
    const org: OrgRecord = { id: newId('org'), slug, name: name || slug, created_at: new Date().toISOString() };
    storage.meta.putSync(K.org(org.id), org);
    storage.meta.putSync(K.orgSlug(slug), org.id);
    return org;
  });
}

export interface CreatedKey {
  record: SigningKeyRecord;
  privateKeyPem: string;
  privateKeyJwk: Record<string, string>;
}

function bumpKeyVersion(storage: Storage): void {
  const v = signingKeyVersion(storage.meta);
  storage.meta.putSync(K.keyVersion(), v + 1);
}

export function createSigningKey(storage: Storage, orgSlug: string, opts: { scopes: string[]; repos?: string[]; name?: string }): CreatedKey {
  const org = getOrgBySlug(storage.meta, orgSlug);
  if (!org) throw invalid(`organization "${orgSlug}" does not exist`);
  if (opts.scopes.length === 0) throw invalid('a key needs at least one scope');
  for (const s of opts.scopes) if (!isScopeName(s)) throw invalid(`unknown scope "${s}"`);
  const name = opts.name || `key-${new Date().toISOString().slice(0, 10)}`;
  if (name.length > 128) throw invalid('key name must be 1 to 128 characters');
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const jwk = publicKey.export({ format: 'jwk' }) as { x: string };
  const publicJwk: PublicJwk = { kty: 'OKP', crv: 'Ed25519', x: jwk.x };
  return storage.root.transactionSync(() => {
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
    storage.meta.putSync(K.key(record.id), record);
    storage.meta.putSync(K.orgKey(org.id, record.id), true);
    bumpKeyVersion(storage);
    return {
      record,
      privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
      privateKeyJwk: privateKey.export({ format: 'jwk' }) as Record<string, string>,
    };
  });
}

function updateKey(storage: Storage, keyId: string, change: (rec: SigningKeyRecord) => void): SigningKeyRecord {
  return storage.root.transactionSync(() => {
    const rec = getSigningKey(storage.meta, keyId);
    if (!rec) throw new ServiceError('NOT_FOUND', `key ${keyId} not found`);
    change(rec);
    storage.meta.putSync(K.key(keyId), rec);
    bumpKeyVersion(storage);
    return rec;
  });
}

export function setKeyStatus(storage: Storage, keyId: string, status: Exclude<KeyStatus, 'revoked'> | 'revoked'): SigningKeyRecord {
  return updateKey(storage, keyId, (rec) => {
    if (rec.status === 'revoked') throw invalid('the key is revoked; revoking is final');
    rec.status = status;
    if (status === 'revoked') rec.revoked_at = new Date().toISOString();
  });
}

export function setKeyScopes(storage: Storage, keyId: string, scopes: string[]): SigningKeyRecord {
  for (const s of scopes) if (!isScopeName(s)) throw invalid(`unknown scope "${s}"`);
  return updateKey(storage, keyId, (rec) => {
    rec.scopes = scopes;
  });
}

/** `k=v` sets, `k=` removes (API §13). */
export function setKeyTags(storage: Storage, keyId: string, pairs: Record<string, string>): SigningKeyRecord {
  checkTagKeys(pairs);
  return updateKey(storage, keyId, (rec) => {
    const tags = { ...rec.tags };
    for (const [k, v] of Object.entries(pairs)) {
      if (v === '') delete tags[k];
      else tags[k] = v;
    }
    rec.tags = tags;
  });
}
