/**
 * Shared fixtures of the read-side tests: git blob ids, content ops for apply-ops, and a work
 * tree of an exported commit to check patches with real git.
 */
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { GitExport } from '../changes/helpers.js';

export function blobOid(content: string | Buffer): string {
  const bytes = typeof content === 'string' ? Buffer.from(content) : content;
  return createHash('sha1').update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
}

export const b64 = (content: string | Buffer): string => (typeof content === 'string' ? Buffer.from(content) : content).toString('base64');

export function writeOp(path: string, content: string | Buffer, mode?: '100644' | '100755' | '120000'): Record<string, unknown> {
  const op: Record<string, unknown> = { op: 'write', path };
  if (typeof content === 'string') Object.assign(op, { content, encoding: 'utf-8' });
  else Object.assign(op, { content: content.toString('base64'), encoding: 'base64' });
  if (mode) op.mode = mode;
  return op;
}

/**
 * Checks out `baseCommit` of an export into a temporary work tree, applies `patch` (after
 * `git apply --check`), and returns the tree oid git writes from the result.
 */
export function applyPatchToCommit(exported: GitExport, baseCommit: string, patch: Buffer): { check: string; tree: string } {
  const work = mkdtempSync(join(tmpdir(), 'repohost-apply-'));
  const env = { ...process.env, GIT_DIR: exported.dir, GIT_WORK_TREE: work, GIT_INDEX_FILE: `${work}.index`, GIT_CONFIG_NOSYSTEM: '1', HOME: work };
  const git = (...args: string[]): { status: number; stdout: string; stderr: string } => {
    const r = spawnSync('git', args, { cwd: work, env, encoding: 'utf8', maxBuffer: 1 << 28 });
    return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
  };
  try {
    if (git('read-tree', baseCommit).status !== 0) throw new Error('read-tree failed');
    git('checkout-index', '-a');
    const file = `${work}.patch`;
    writeFileSync(file, patch);
    const check = git('apply', '--check', file);
    if (check.status !== 0) return { check: check.stderr || 'git apply --check failed', tree: '' };
    const applied = git('apply', file);
    if (applied.status !== 0) return { check: applied.stderr, tree: '' };
    git('add', '-A', '.');
    return { check: '', tree: git('write-tree').stdout.trim() };
  } finally {
    rmSync(work, { recursive: true, force: true });
    rmSync(`${work}.index`, { force: true });
    rmSync(`${work}.patch`, { force: true });
  }
}
