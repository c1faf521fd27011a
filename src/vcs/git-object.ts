/**
 * Git object formats: the object id, trees and commits, byte for byte as git writes them, so
 * that every object passes `git fsck --strict` and has the id git would give it.
 */
import { createHash } from 'node:crypto';
import { VcsError } from './errors.js';
import type { ObjectStore, ObjectType } from './object-store.js';
import type { EntryName } from './tree-order.js';

export const EMPTY_TREE_OID = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

/** The only modes `git fsck --strict` accepts (no zero padding, no 100664). */
export type TreeEntryMode = '40000' | '100644' | '100755' | '120000' | '160000';
export type FileMode = Exclude<TreeEntryMode, '40000'>;

export const TREE_MODE: TreeEntryMode = '40000';
const MODES: ReadonlySet<string> = new Set(['40000', '100644', '100755', '120000', '160000']);

export function isTreeEntryMode(mode: string): mode is TreeEntryMode {
  return MODES.has(mode);
}

/** A mode with its object: what sits at a path (a file, symlink, submodule or directory). */
export interface TreeValue {
  mode: TreeEntryMode;
  oid: string;
}

export interface TreeEntry extends TreeValue {
  name: string;
}

/** A git identity line: `Name <email> <unix-seconds> <+hhmm>`. */
export interface GitSignature {
  name: string;
  email: string;
  /** Unix seconds. */
  timestamp: number;
  /** Offset from UTC in minutes (east positive). */
  tzOffsetMinutes: number;
}

export interface CommitHeader {
  name: string;
  /** May span lines; encoded with git's continuation lines (a leading space). */
  value: string;
}

export interface CommitObject {
  tree: string;
  parents: string[];
  author: GitSignature;
  committer: GitSignature;
  /** Headers after `committer` in order (e.g. `jj:trees`, `change-id`, `gpgsig`). */
  extraHeaders: CommitHeader[];
  message: string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function hashObject(type: ObjectType, content: Uint8Array): string {
  return createHash('sha1').update(`${type} ${content.length}\0`).update(content).digest('hex');
}

/**
 * Git's tree order (as `compareTreeOrder` in tree-order.ts reads it in place): names compared as
 * bytes, a directory as if its name ended with `/`.
 * (Two entries never share a name, so the suffix only decides `a` vs `a.b` vs `a/`.)
 */
function sortKey(entry: TreeEntry): Buffer {
  return Buffer.from(entry.mode === TREE_MODE ? `${entry.name}/` : entry.name, 'utf8');
}

export function encodeTree(entries: readonly TreeEntry[]): Uint8Array {
  const keyed = entries.map((entry) => ({ entry, key: sortKey(entry) }));
  keyed.sort((a, b) => Buffer.compare(a.key, b.key));
  const seen = new Set<string>();
  const parts: Buffer[] = [];
  for (const { entry } of keyed) {
    const { name, mode, oid } = entry;
    if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
      throw new VcsError('corrupt', `invalid tree entry name ${JSON.stringify(name)}`);
    }
    if (!isTreeEntryMode(mode)) throw new VcsError('corrupt', `invalid tree entry mode ${String(mode)}`);
    if (!/^[0-9a-f]{40}$/.test(oid)) throw new VcsError('corrupt', `invalid tree entry oid ${oid}`);
    if (seen.has(name)) throw new VcsError('corrupt', `duplicate tree entry ${JSON.stringify(name)}`);
    seen.add(name);
    parts.push(Buffer.from(`${mode} ${name}\0`, 'utf8'), Buffer.from(oid, 'hex'));
  }
  return Buffer.concat(parts);
}

/** One entry of a tree as stored: its name in place (`EntryName`), where its mode starts and the next entry begins. */
export interface StoredTreeEntry extends EntryName {
  pos: number;
  next: number;
}

/** The entry at `pos` of a tree's bytes, or null when the bytes there are not one. */
export function findTreeEntry(buf: Buffer, pos: number): StoredTreeEntry | null {
  // Modes and names are short: loops here cost less than calls into Buffer.indexOf (a tree diff
  // of 625 entries: 126 against 250 µs).
  let space = pos;
  while (space < buf.length && buf[space] !== 0x20) space++;
  let nul = space + 1;
  while (nul < buf.length && buf[nul] !== 0) nul++;
  if (space >= buf.length || nul + 21 > buf.length) return null;
  // "40000", or "040000" as old git wrote it: the only modes that start so.
  const dir = buf[pos] === 0x34 || (buf[pos] === 0x30 && buf[pos + 1] === 0x34);
  return { buf, pos, start: space + 1, end: nul, dir, next: nul + 21 };
}

/** The entry at `pos` of a tree's bytes; throws on bytes that are not one. */
export function treeEntryAt(buf: Buffer, pos: number): StoredTreeEntry {
  const entry = findTreeEntry(buf, pos);
  if (!entry) throw new VcsError('corrupt', 'corrupt tree object');
  return entry;
}

/** A stored entry decoded: its mode made canonical, its name and its oid. */
export function decodeTreeEntry(entry: StoredTreeEntry): TreeEntry {
  const { buf, pos, start, end } = entry;
  let mode = buf.toString('latin1', pos, start - 1);
  // Old git wrote zero-padded directory modes; read them as the canonical mode.
  if (mode === '040000') mode = TREE_MODE;
  if (mode === '100664') mode = '100644';
  if (!isTreeEntryMode(mode)) throw new VcsError('corrupt', `unsupported tree entry mode ${mode}`);
  return { mode, name: buf.toString('utf8', start, end), oid: buf.toString('hex', end + 1, end + 21) };
}

export function parseTree(content: Uint8Array): TreeEntry[] {
  const buf = Buffer.from(content.buffer, content.byteOffset, content.byteLength);
  const entries: TreeEntry[] = [];
  for (let pos = 0; pos < buf.length; ) {
    const entry = treeEntryAt(buf, pos);
    entries.push(decodeTreeEntry(entry));
    pos = entry.next;
  }
  return entries;
}

export function formatTimezone(offsetMinutes: number): string {
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(Math.trunc(offsetMinutes));
  return `${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}${String(abs % 60).padStart(2, '0')}`;
}

/**
 * `Name <email> seconds +hhmm`. Characters git cannot keep in an identity (`<`, `>`, newlines,
 * NUL) are dropped, and negative times clamp to 0, so the line always passes fsck.
 */
export function formatSignature(sig: GitSignature): string {
  const clean = (s: string): string => s.replace(/[<>\n\r\0]/g, '').trim();
  const seconds = Math.max(0, Math.floor(sig.timestamp));
  return `${clean(sig.name)} <${clean(sig.email)}> ${seconds} ${formatTimezone(sig.tzOffsetMinutes)}`;
}

export function parseSignature(line: string): GitSignature {
  const m = /^(.*?) ?<([^>]*)> (-?\d+)(?: ([+-])(\d{2})(\d{2}))?\s*$/.exec(line);
  if (!m) return { name: line.trim(), email: '', timestamp: 0, tzOffsetMinutes: 0 };
  const tz = m[4] ? (m[4] === '-' ? -1 : 1) * (Number(m[5]) * 60 + Number(m[6])) : 0;
  return { name: m[1]!, email: m[2]!, timestamp: Number(m[3]), tzOffsetMinutes: tz };
}

export function encodeCommit(commit: CommitObject): Uint8Array {
  let text = `tree ${commit.tree}\n`;
  for (const parent of commit.parents) text += `parent ${parent}\n`;
  text += `author ${formatSignature(commit.author)}\n`;
  text += `committer ${formatSignature(commit.committer)}\n`;
  for (const { name, value } of commit.extraHeaders) {
    if (!/^[^\s\0]+$/.test(name)) throw new VcsError('corrupt', `invalid commit header name ${JSON.stringify(name)}`);
    text += `${name} ${value.replace(/\n/g, '\n ')}\n`;
  }
  text += `\n${commit.message}`;
  return encoder.encode(text);
}

export function parseCommit(content: Uint8Array): CommitObject {
  const buf = Buffer.from(content.buffer, content.byteOffset, content.byteLength);
  const split = buf.indexOf('\n\n');
  const headerText = buf.toString('utf8', 0, split < 0 ? buf.length : split);
  const message = split < 0 ? '' : decoder.decode(buf.subarray(split + 2));
  const headers: CommitHeader[] = [];
  for (const line of headerText.split('\n')) {
    if (line.startsWith(' ') && headers.length > 0) {
      headers[headers.length - 1]!.value += `\n${line.slice(1)}`;
      continue;
    }
    const space = line.indexOf(' ');
    headers.push(space < 0 ? { name: line, value: '' } : { name: line.slice(0, space), value: line.slice(space + 1) });
  }
  let tree: string | undefined;
  const parents: string[] = [];
  let author: GitSignature | undefined;
  let committer: GitSignature | undefined;
  const extraHeaders: CommitHeader[] = [];
  for (const header of headers) {
    if (header.name === 'tree' && tree === undefined) tree = header.value;
    else if (header.name === 'parent' && author === undefined) parents.push(header.value);
    else if (header.name === 'author' && author === undefined) author = parseSignature(header.value);
    else if (header.name === 'committer' && committer === undefined) committer = parseSignature(header.value);
    else if (header.name !== '') extraHeaders.push(header);
  }
  if (tree === undefined || author === undefined || committer === undefined) {
    throw new VcsError('corrupt', 'corrupt commit object');
  }
  return { tree, parents, author, committer, extraHeaders, message };
}

/** The first value of a commit header, or undefined. */
export function commitHeader(commit: CommitObject, name: string): string | undefined {
  return commit.extraHeaders.find((h) => h.name === name)?.value;
}

// ---- store helpers: typed reads that treat a missing object as corruption --------------------

function readTyped(store: ObjectStore, oid: string, type: ObjectType): Uint8Array {
  const object = store.read(oid);
  if (object === undefined) throw new VcsError('corrupt', `missing ${type} ${oid}`);
  if (object.type !== type) throw new VcsError('corrupt', `object ${oid} is a ${object.type}, not a ${type}`);
  return object.content;
}

export function readTree(store: ObjectStore, oid: string): TreeEntry[] {
  return parseTree(readTreeBytes(store, oid));
}

/** A tree's stored bytes, not decoded (`treeEntryAt` reads them). */
export function readTreeBytes(store: ObjectStore, oid: string): Buffer {
  if (oid === EMPTY_TREE_OID) return Buffer.alloc(0);
  const content = readTyped(store, oid, 'tree');
  return Buffer.from(content.buffer, content.byteOffset, content.byteLength);
}

export function writeTree(store: ObjectStore, entries: readonly TreeEntry[]): string {
  return store.write('tree', encodeTree(entries));
}

export function readBlob(store: ObjectStore, oid: string): Uint8Array {
  return readTyped(store, oid, 'blob');
}

export function writeBlob(store: ObjectStore, content: Uint8Array | string): string {
  return store.write('blob', typeof content === 'string' ? encoder.encode(content) : content);
}

export function readCommit(store: ObjectStore, oid: string): CommitObject {
  return parseCommit(readTyped(store, oid, 'commit'));
}

export function writeCommit(store: ObjectStore, commit: CommitObject): string {
  return store.write('commit', encodeCommit(commit));
}
