import { createWriteStream, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { constants, createDeflate, deflateSync } from 'node:zlib';
import type { Transaction } from 'lmdb';
import { ServiceError, invalid } from '../errors.js';
import type { Storage } from './database.js';
import { decodeObjectValue } from './git-object-store.js';
import { listGitRefs } from './git-refs.js';
import { K, lastPart, Ranges } from './keys.js';
import { pendingOids } from './pending-objects.js';
import type { RepoRecord } from './records.js';

/**
 * `repohost export`: the repository as a bare git repository (API §13). Every stored object is
 * written as a loose object (zlib-deflated `type size\0content`; large blobs stream through the
 * deflater chunk by chunk), every bookmark as `refs/heads/<name>`, every commit the repository
 * ever had as `refs/jj/keep/<oid>` (so evolution history stays reachable, as jj keeps it), every
 * tag pulled from the upstream as `refs/tags/<name>` (an annotated tag stays a tag object, with
 * its peeled target in packed-refs), the pulled agentblame notes as `refs/notes/agentblame`, and
 * HEAD names the default bookmark. Conflicted commits keep jj's raw layout.
 *
 * Everything is read from ONE LMDB snapshot, held for the whole export: objects are deleted now
 * (unreferenced blobs are collected, a refused pull is taken back, a repository can be deleted),
 * so refs read at one moment and objects at a later one could disagree. Objects still pending
 * (uploads nothing references yet, a pull's objects before it applies) are left out: no ref
 * reaches them.
 */
export interface ExportSummary {
  objects: number;
  bookmarks: number;
  tags: number;
  notes: number;
  kept_commits: number;
  dir: string;
}

/** A chunk of a large blob as the export's snapshot has it. */
function snapshotChunk(storage: Storage, txn: Transaction, repoId: string, uploadId: string, index: number): Buffer {
  const chunk = storage.chunks.get(K.chunk(repoId, uploadId, index), { transaction: txn });
  if (!chunk) throw new ServiceError('INTERNAL_ERROR', `missing chunk ${index} of upload ${uploadId}`);
  return chunk;
}

async function writeChunkedObject(storage: Storage, txn: Transaction, repoId: string, file: string, uploadId: string, chunks: number, size: number): Promise<void> {
  // Level 1: a large blob is mostly already-compressed data; speed matters more than ratio.
  const deflate = createDeflate({ level: constants.Z_BEST_SPEED });
  const out = createWriteStream(file);
  const done = new Promise<void>((resolve, reject) => {
    out.on('finish', resolve);
    out.on('error', reject);
    deflate.on('error', reject);
  });
  deflate.pipe(out);
  const write = async (piece: Buffer): Promise<void> => {
    if (!deflate.write(piece)) await once(deflate, 'drain');
  };
  await write(Buffer.from(`blob ${size}\0`));
  for (let i = 0; i < chunks; i++) await write(snapshotChunk(storage, txn, repoId, uploadId, i));
  deflate.end();
  await done;
}

export async function exportRepository(storage: Storage, repo: RepoRecord, dir: string): Promise<ExportSummary> {
  if (existsSync(dir) && readdirSync(dir).length > 0) throw invalid(`export directory ${dir} is not empty`);
  const txn = storage.root.useReadTransaction();
  try {
    return await exportSnapshot(storage, txn, repo, dir);
  } finally {
    txn.done();
  }
}

async function exportSnapshot(storage: Storage, txn: Transaction, repo: RepoRecord, dir: string): Promise<ExportSummary> {
  for (const sub of ['objects/info', 'objects/pack', 'refs/heads', 'refs/tags']) mkdirSync(join(dir, sub), { recursive: true });
  writeFileSync(join(dir, 'config'), '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n');
  writeFileSync(join(dir, 'HEAD'), `ref: refs/heads/${repo.default_bookmark}\n`);
  writeFileSync(join(dir, 'description'), `${repo.name}\n`);

  const { refs } = listGitRefs(storage, txn, repo, { kept: true });
  const count = (prefix: string): number => refs.filter((r) => r.name.startsWith(prefix)).length;
  // `fully-peeled`: every annotated tag is followed by its `^peeled` line, as git writes it.
  const lines = refs.map(({ name, oid, peeled }) => `${oid} ${name}\n${peeled ? `^${peeled}\n` : ''}`);
  writeFileSync(join(dir, 'packed-refs'), `# pack-refs with: peeled fully-peeled sorted \n${lines.join('')}`);

  const pending = pendingOids(storage.meta, repo.id, txn);
  let objects = 0;
  const folders = new Set<string>();
  for (const { key, value } of storage.objects.getRange({ ...Ranges.objects(repo.id), transaction: txn })) {
    const oid = lastPart(key);
    if (pending.has(oid)) continue;
    const folder = join(dir, 'objects', oid.slice(0, 2));
    if (!folders.has(folder)) {
      mkdirSync(folder, { recursive: true });
      folders.add(folder);
    }
    const file = join(folder, oid.slice(2));
    const info = decodeObjectValue(oid, value);
    if (info.chunked) await writeChunkedObject(storage, txn, repo.id, file, info.chunked.u, info.chunked.n, info.size);
    else writeFileSync(file, deflateSync(Buffer.concat([Buffer.from(`${info.type} ${info.size}\0`), info.content])));
    objects++;
  }
  return { objects, bookmarks: count('refs/heads/'), tags: count('refs/tags/'), notes: count('refs/notes/'), kept_commits: count('refs/jj/keep/'), dir };
}
