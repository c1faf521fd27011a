/**
 * Repository paths as clients send them. A path is accepted only in its one normal form, so
 * that two spellings never name the same file and nothing can escape into `.git`.
 */
import { VcsError } from './errors.js';

export const MAX_PATH_BYTES = 4096;

// Code points HFS+ ignores in names (git's `is_hfs_dotgit`): `.g\u200cit` is `.git` on a Mac.
const HFS_IGNORABLE = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * True for `.git` in any case and for the spellings that file systems read as `.git`
 * (`.git.`, `.git `, `git~1`, HFS-ignorable code points), which `git fsck` also refuses.
 */
export function isDotGitName(segment: string): boolean {
  const folded = segment.replace(HFS_IGNORABLE, '').toLowerCase();
  return folded.replace(/[. ]+$/, '') === '.git' || folded === 'git~1';
}

function reject(path: string, why: string): never {
  throw new VcsError('invalid-path', `invalid path ${JSON.stringify(path)}: ${why}`, { path });
}

/**
 * Returns the path when it is already normal (relative, `/`-separated, no `.`, `..` or empty
 * segments, no `.git` segment, no NUL, at most 4,096 UTF-8 bytes); otherwise throws an
 * `invalid-path` error saying which rule failed. Callers add the op index to the message.
 */
export function normalizePath(path: string): string {
  if (typeof path !== 'string' || path === '') reject(String(path), 'a path must not be empty');
  if (path.includes('\0')) reject(path, 'a path must not contain NUL');
  if (LONE_SURROGATE.test(path)) reject(path, 'a path must be valid Unicode');
  if (Buffer.byteLength(path, 'utf8') > MAX_PATH_BYTES) reject(path, `a path must be at most ${MAX_PATH_BYTES} bytes`);
  if (path.startsWith('/')) reject(path, 'a path must be relative (no leading "/")');
  for (const segment of path.split('/')) {
    if (segment === '') reject(path, 'a path must not contain empty segments ("//" or a trailing "/")');
    if (segment === '.' || segment === '..') reject(path, 'a path must not contain "." or ".." segments');
    if (isDotGitName(segment)) reject(path, 'a path must not contain a ".git" segment');
  }
  return path;
}

export function pathSegments(path: string): string[] {
  return path === '' ? [] : path.split('/');
}

export function joinPath(prefix: string, name: string): string {
  return prefix === '' ? name : `${prefix}/${name}`;
}
