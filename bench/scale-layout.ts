/**
 * The repositories of the file-count curve: n small files laid out flat (every file in the root
 * directory, so the root holds n entries) or 8 levels deep (every file under 8 directories, each
 * directory holding at most B entries, B = ⌈n^(1/9)⌉: 3 at 1k files, 5 at 1M). A one-file write
 * rewrites the directories on its path, so it costs O(n) flat and O(8 × B) deep.
 */
import type { ApiClient } from './api-client.js';
import { ROOT_CHANGE_ID } from './generator-protocol.js';

export type Layout = 'deep' | 'flat';

export const DEPTH = 8;
/** apply-ops takes at most 10,000 ops per request (API §5.4). */
const OPS_PER_REQUEST = 10_000;
const FILE_BYTES = 64;

function fanout(files: number): number {
  return Math.max(2, Math.ceil(files ** (1 / (DEPTH + 1))));
}

/** Path of file `i` of `files` in the layout. */
export function layoutPath(layout: Layout, files: number, i: number): string {
  if (layout === 'flat') return `f-${i}.txt`;
  const b = fanout(files);
  const dirs: string[] = [];
  let leaf = Math.floor(i / b);
  for (let d = 0; d < DEPTH; d++) {
    dirs.push(`d${leaf % b}`);
    leaf = Math.floor(leaf / b);
  }
  return `${dirs.reverse().join('/')}/f-${i}.txt`;
}

export function layoutContent(i: number, edit = 0): string {
  return `file ${i} edit ${edit}\n`.padEnd(FILE_BYTES - 1, '.') + '\n';
}

export interface BuiltRepo {
  /** Change ids of the build, oldest first; the last is the tip of the default bookmark. */
  chain: string[];
  seconds: number;
}

/**
 * Writes the `files` files into the empty repository `repo`, up to 10,000 per apply-ops, each
 * request a change on top of the previous one, moving `bookmark` along. `beforeRequest` runs
 * before each request (long builds renew their token there).
 */
export async function buildRepo(
  api: ApiClient,
  repo: string,
  bookmark: string,
  layout: Layout,
  files: number,
  beforeRequest: () => Promise<void> = async () => {},
): Promise<BuiltRepo> {
  const started = performance.now();
  const chain: string[] = [];
  for (let from = 0; from < files; from += OPS_PER_REQUEST) {
    const ops = [];
    for (let i = from; i < Math.min(files, from + OPS_PER_REQUEST); i++) {
      ops.push({ op: 'write', path: layoutPath(layout, files, i), content: layoutContent(i), encoding: 'utf-8' });
    }
    await beforeRequest();
    const res = await api.expect<{ change: { id: string } }>(201, 'POST', api.repoPath(repo, '/apply-ops'), {
      base_change_id: chain[chain.length - 1] ?? ROOT_CHANGE_ID,
      message: `scale fixture: files ${from}–${from + ops.length - 1} of ${files}`,
      ops,
      bookmarks: [{ name: bookmark }],
    });
    chain.push(res.change.id);
  }
  return { chain, seconds: (performance.now() - started) / 1000 };
}
