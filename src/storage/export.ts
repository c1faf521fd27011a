import { createWriteStream, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { constants, createDeflate, deflateSync } from 'node:zlib';
import { invalid } from '../errors.js';
import { ROOT_CHANGE_ID } from '../vcs/ids.js';
import type { Storage } from './database.js';
import { getChange } from './change-store.js';
import { decodeObjectValue, readChunk } from './git-object-store.js';
import { under } from './keys.js';
import type { BookmarkRecord, RepoRecord } from './records.js';

/**
 * `repohost export`: the repository as a bare git repository (API §13). Every stored object is
 * written as a loose object (zlib-deflated `type size\0content`; large blobs stream through the
 * deflater chunk by chunk), every bookmark as `refs/heads/<name>`, every commit the repository
 * ever had as `refs/jj/keep/<oid>` (so evolution history stays reachable, as jj keeps it), and
 * HEAD names the default bookmark. Conflicted commits keep jj's raw layout.
 */
export interface ExportSummary {
  objects: number;
  bookmarks: number;
  kept_commits: number;
  dir: string;
}

async function writeChunkedObject(storage: Storage, repoId: string, file: string, uploadId: string, chunks: number, size: number): Promise<void> {
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
  for (let i = 0; i < chunks; i++) await write(readChunk(storage, repoId, uploadId, i));
  deflate.end();
  await done;
}

export async function exportRepository(storage: Storage, repo: RepoRecord, dir: string): Promise<ExportSummary> {
  if (existsSync(dir) && readdirSync(dir).length > 0) throw invalid(`export directory ${dir} is not empty`);
  for (const sub of ['objects/info', 'objects/pack', 'refs/heads', 'refs/tags']) mkdirSync(join(dir, sub), { recursive: true });
  writeFileSync(join(dir, 'config'), '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n');
  writeFileSync(join(dir, 'HEAD'), `ref: refs/heads/${repo.default_bookmark}\n`);
  writeFileSync(join(dir, 'description'), `${repo.name}\n`);

  // Refs first, objects second: objects are never deleted, so every ref read here finds its
  // objects below even if writes land in between.
  const refs: Array<[string, string]> = [];
  let bookmarks = 0;
  for (const { value } of storage.meta.getRange(under(['r', repo.id, 'bm']))) {
    const bookmark = value as BookmarkRecord;
    if (bookmark.change_id === ROOT_CHANGE_ID) continue;
    const change = getChange(storage.meta, repo.id, bookmark.change_id);
    if (!change) continue;
    refs.push([`refs/heads/${bookmark.name}`, change.commit_oid]);
    bookmarks++;
  }
  let kept = 0;
  for (const key of storage.meta.getKeys(under(['r', repo.id, 'commit']))) {
    const oid = (key as string[])[3]!;
    refs.push([`refs/jj/keep/${oid}`, oid]);
    kept++;
  }
  refs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  writeFileSync(join(dir, 'packed-refs'), `# pack-refs with: peeled fully-peeled sorted \n${refs.map(([ref, oid]) => `${oid} ${ref}\n`).join('')}`);

  let objects = 0;
  const folders = new Set<string>();
  for (const { key, value } of storage.objects.getRange(under([repo.id]))) {
    const oid = (key as string[])[1]!;
    const folder = join(dir, 'objects', oid.slice(0, 2));
    if (!folders.has(folder)) {
      mkdirSync(folder, { recursive: true });
      folders.add(folder);
    }
    const file = join(folder, oid.slice(2));
    const info = decodeObjectValue(oid, value);
    if (info.chunked) await writeChunkedObject(storage, repo.id, file, info.chunked.u, info.chunked.n, info.size);
    else writeFileSync(file, deflateSync(Buffer.concat([Buffer.from(`${info.type} ${info.size}\0`), info.content])));
    objects++;
  }
  return { objects, bookmarks, kept_commits: kept, dir };
}
