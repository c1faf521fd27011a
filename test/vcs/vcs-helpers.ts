/**
 * Shared fixtures for the change-model tests: building trees from a `{path: content}` map and
 * checking objects with real git (loose objects in a temporary bare repository + `git fsck`).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { EMPTY_TREE_OID, readBlob, writeBlob } from '../../src/vcs/git-object.js';
import type { FileMode } from '../../src/vcs/git-object.js';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { applyTreeEdits, lookupPath, writeEmptyTree } from '../../src/vcs/tree-edit.js';
import type { TreeEdit } from '../../src/vcs/tree-edit.js';

export type FileSpec = string | { content: string; mode: FileMode };

/** Writes a root tree holding exactly `files`. */
export function makeTree(store: MemoryObjectStore, files: Record<string, FileSpec>): string {
  writeEmptyTree(store);
  const edits: TreeEdit[] = Object.entries(files).map(([path, spec]) => {
    const { content, mode } = typeof spec === 'string' ? { content: spec, mode: '100644' as const } : spec;
    return { op: 'write', path, blobOid: writeBlob(store, content), mode };
  });
  return applyTreeEdits(store, EMPTY_TREE_OID, edits);
}

/** The text at `path` in a tree, or undefined. */
export function readText(store: MemoryObjectStore, treeOid: string, path: string): string | undefined {
  const value = lookupPath(store, treeOid, path);
  return value ? Buffer.from(readBlob(store, value.oid)).toString('utf8') : undefined;
}

export interface GitRepo {
  dir: string;
  git(...args: string[]): { status: number; stdout: string; stderr: string };
  cleanup: () => void;
}

/** A bare repository holding every object of `store` as a loose object, with the given refs. */
export function exportToGit(store: MemoryObjectStore, refs: Record<string, string>): GitRepo {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-vcs-'));
  const env = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: dir };
  const git = (...args: string[]): { status: number; stdout: string; stderr: string } => {
    const r = spawnSync('git', args, { cwd: dir, env, encoding: 'utf8' });
    return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
  };
  const init = git('init', '--bare', '-q', '.');
  if (init.status !== 0) throw new Error(`git init failed: ${init.stderr}`);
  for (const [oid, object] of store.entries()) {
    const folder = join(dir, 'objects', oid.slice(0, 2));
    mkdirSync(folder, { recursive: true });
    const header = Buffer.from(`${object.type} ${object.content.length}\0`);
    writeFileSync(join(folder, oid.slice(2)), deflateSync(Buffer.concat([header, object.content])));
  }
  for (const [ref, oid] of Object.entries(refs)) {
    mkdirSync(join(dir, ref, '..'), { recursive: true });
    writeFileSync(join(dir, ref), `${oid}\n`);
  }
  return { dir, git, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `git fsck --strict` over the exported store: status 0 and no error or warning lines. */
export function fsckStrict(store: MemoryObjectStore, refs: Record<string, string>): { ok: boolean; output: string } {
  const repo = exportToGit(store, refs);
  try {
    const r = repo.git('fsck', '--strict', '--no-progress', '--no-dangling');
    const output = `${r.stdout}${r.stderr}`;
    return { ok: r.status === 0 && !/error|warning|missing|broken/i.test(output), output };
  } finally {
    repo.cleanup();
  }
}

export const ALICE = { name: 'Alice', email: 'alice@example.com' };
export const BOB = { name: 'Bob', email: 'bob@example.com' };
export const WRITER = { name: 'repohost', email: 'writer@example.com' };
export const T0 = new Date('2026-01-02T03:04:05.000Z');
