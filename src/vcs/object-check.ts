/**
 * The checks `git fsck --strict` makes on one object, for objects that come from outside (a git
 * push, API §14): commits, trees and tags must be well formed, and no tree entry may be named in a
 * way that escapes or shadows a work tree (`.git` in any of the spellings Windows and macOS fold
 * to it, `.`, `..`, an empty name, a `/`). What an accepted object refers to is returned, so the
 * receiver can check that the pack is connected. The checks read bytes only: no store is needed.
 */
import type { ObjectType } from './object-store.js';
import { findTreeEntry } from './git-object.js';
import { compareTreeOrder, type EntryName } from './tree-order.js';

export type ObjectCheck = { references: string[] } | { problem: string };

const OID = /^[0-9a-f]{40}$/;
/** `Name <email> seconds +hhmm`, as fsck_ident reads it: something before the email, a space before `<`. */
const IDENT = /^(?!<)[^<>\n]* <[^<>\n]*> (0|[1-9]\d*) [+-]\d{4}$/;
const TREE_MODES = new Set(['100644', '100755', '120000', '40000', '160000']);
const OBJECT_TYPES = new Set(['commit', 'tree', 'blob', 'tag']);

const problem = (text: string): ObjectCheck => ({ problem: text });

/**
 * Whether a file system would open `name` as `.git`: any case, and on NTFS also with trailing
 * dots or spaces or as its short name `git~1`.
 */
export function isDotGit(name: string): boolean {
  const folded = name.toLowerCase().replace(/[. ]+$/, '');
  return folded === '.git' || folded === 'git~1';
}

/** The header lines of a commit or tag (up to the first empty line, or a last newline when there is no message); null when unterminated. */
function headerLines(content: Uint8Array): string[] | null {
  const buf = Buffer.from(content.buffer, content.byteOffset, content.byteLength);
  let end = buf.indexOf('\n\n');
  if (end < 0) {
    if (buf[buf.length - 1] !== 0x0a) return null;
    end = buf.length - 1;
  }
  return buf.toString('latin1', 0, end).split('\n');
}

function checkCommit(content: Uint8Array): ObjectCheck {
  const lines = headerLines(content);
  if (!lines) return problem('the commit\'s headers are not terminated');
  if (lines.some((line) => line.includes('\0'))) return problem('the commit has a NUL byte in its headers');
  let at = 0;
  const tree = /^tree (.*)$/.exec(lines[at] ?? '');
  if (!tree || !OID.test(tree[1]!)) return problem('the commit does not start with a valid tree line');
  const references = [tree[1]!];
  for (at = 1; lines[at]?.startsWith('parent '); at++) {
    const parent = lines[at]!.slice(7);
    if (!OID.test(parent)) return problem('the commit has an invalid parent line');
    references.push(parent);
  }
  for (const field of ['author', 'committer']) {
    const line = lines[at++] ?? '';
    if (!line.startsWith(`${field} `)) return problem(`the commit has no ${field} line where git expects it`);
    if (!IDENT.test(line.slice(field.length + 1))) return problem(`the commit's ${field} line is malformed`);
  }
  for (; at < lines.length; at++) {
    const line = lines[at]!;
    if (/^(tree|parent|author|committer) /.test(line)) return problem(`the commit has a misplaced ${line.slice(0, line.indexOf(' '))} line`);
  }
  return { references };
}

function checkTree(content: Uint8Array): ObjectCheck {
  const buf = Buffer.from(content.buffer, content.byteOffset, content.byteLength);
  const references: string[] = [];
  const names = new Set<string>();
  let previous: EntryName | null = null;
  let pos = 0;
  while (pos < buf.length) {
    const found = findTreeEntry(buf, pos);
    if (!found) return problem('the tree is truncated or malformed');
    const { start, end: nul } = found;
    const mode = buf.toString('latin1', pos, start - 1);
    // fsck takes only "40000" for a directory (a zero-padded mode is refused below).
    const entry: EntryName = { buf, start, end: nul, dir: mode === '40000' };
    // Names are compared as bytes (latin1 keeps them one character per byte); only a refusal decodes them.
    const name = buf.toString('latin1', entry.start, entry.end);
    const shown = (): string => JSON.stringify(buf.toString('utf8', entry.start, entry.end));
    if (!TREE_MODES.has(mode)) return problem(`the tree entry ${shown()} has the mode ${JSON.stringify(mode)}, which git fsck refuses`);
    if (name.length === 0) return problem('the tree has an entry with an empty name');
    if (name.includes('/')) return problem(`the tree entry ${shown()} contains a "/"`);
    if (name === '.' || name === '..') return problem(`the tree has an entry named ${shown()}`);
    if (isDotGit(name)) return problem(`the tree has an entry named ${shown()}, which a checkout would take for .git`);
    if (names.has(name)) return problem(`the tree has two entries named ${shown()}`);
    names.add(name);
    if (previous && compareTreeOrder(previous, entry) >= 0) return problem(`the tree's entries are not sorted (at ${shown()})`);
    previous = entry;
    if (mode !== '160000') references.push(buf.toString('hex', nul + 1, nul + 21));
    pos = nul + 21;
  }
  return { references };
}

function checkTag(content: Uint8Array): ObjectCheck {
  const lines = headerLines(content);
  if (!lines) return problem('the tag\'s headers are not terminated');
  const object = /^object (.*)$/.exec(lines[0] ?? '');
  if (!object || !OID.test(object[1]!)) return problem('the tag does not start with a valid object line');
  const type = /^type (.*)$/.exec(lines[1] ?? '');
  if (!type || !OBJECT_TYPES.has(type[1]!)) return problem('the tag has no valid type line');
  const tag = /^tag (.+)$/.exec(lines[2] ?? '');
  if (!tag) return problem('the tag has no tag name line');
  const tagger = lines[3];
  if (tagger !== undefined && tagger.startsWith('tagger ') && !IDENT.test(tagger.slice(7))) return problem("the tag's tagger line is malformed");
  return { references: [object[1]!] };
}

export function checkObject(type: ObjectType, content: Uint8Array): ObjectCheck {
  switch (type) {
    case 'commit':
      return checkCommit(content);
    case 'tree':
      return checkTree(content);
    case 'tag':
      return checkTag(content);
    case 'blob':
      return { references: [] };
  }
}
