/**
 * Shared fixtures of the storage lifecycle tests (quota, blob collection): random contents,
 * writes through the API, and a look at the counters in LMDB once the server is stopped (no API
 * shows them).
 */
import { randomBytes } from 'node:crypto';
import { openStorage } from '../../src/storage/database.js';
import { K, lastPart, Ranges } from '../../src/storage/keys.js';
import { shardAllowance } from '../../src/storage/quota.js';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import type { TestServer } from '../helpers/server.js';

/** A key without its shard number: the tuple a shard-owned key had before shards (global keys as they are). */
export function withoutShard(key: readonly unknown[]): readonly unknown[] {
  return typeof key[0] === 'number' ? key.slice(1) : key;
}

export const ROOT = 'z'.repeat(32);

/** Incompressible bytes, so an object's size is its content size. */
export const noise = (n: number): Buffer => randomBytes(n);

export type ApiResult = Awaited<ReturnType<TestServer['api']>>;

export function writeBinary(s: TestServer, repo: string, base: string, path: string, bytes: Buffer, extra: Record<string, unknown> = {}): Promise<ApiResult> {
  return s.api('POST', `/${s.org}/${repo}/apply-ops`, {
    body: { base_change_id: base, ops: [{ op: 'write', path, content: bytes.toString('base64'), encoding: 'base64' }], ...extra },
  });
}

export function uploadBlob(s: TestServer, repo: string, bytes: Buffer): Promise<ApiResult> {
  return s.api('POST', `/${s.org}/${repo}/blobs`, { raw: bytes, headers: { 'content-type': 'application/octet-stream' } });
}

export async function createRepo(s: TestServer, name: string): Promise<string> {
  const res = await s.api('POST', `/${s.org}/repos`, { body: { name } });
  if (res.status !== 201) throw new Error(`create ${name}: ${res.status} ${res.text}`);
  return res.json.id as string;
}

export interface StoredState {
  /** The org's stored bytes: what its repositories use, summed over the shards. */
  orgBytes: number;
  repoBytes: number | undefined;
  pending: string[];
  staged: string[];
  objects: string[];
  /** Upload ids that have chunks in the `chunks` database. */
  chunkUploads: string[];
}

type Meta = ReturnType<typeof openStorage>['meta'];

export function orgBytesUsed(meta: Meta, orgId: string): number {
  let used = 0;
  for (let shard = 0; shard < SHARD_COUNT; shard++) used += shardAllowance(meta, shard, orgId).used;
  return used;
}

/** What LMDB holds for an org and a repository (open only while the server is stopped). */
export function storedState(dataDir: string, orgId: string, repoId: string): StoredState {
  const storage = openStorage(dataDir);
  try {
    const { meta } = storage;
    return {
      orgBytes: orgBytesUsed(meta, orgId),
      repoBytes: meta.get(K.repoBytes(repoId)) as number | undefined,
      pending: [...meta.getKeys(Ranges.pending(repoId))].map(lastPart),
      staged: [...meta.getKeys(Ranges.staged(repoId))].map(lastPart),
      objects: [...storage.objects.getKeys(Ranges.objects(repoId))].map(lastPart),
      chunkUploads: [...new Set([...storage.chunks.getKeys(Ranges.chunks(repoId))].map((k) => withoutShard(k as unknown[])[1] as string))],
    };
  } finally {
    void storage.close();
  }
}

export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 15000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
