/**
 * `git diff --binary` output for a list of file changes: `diff --git` headers, mode lines,
 * renames, full-oid `index` lines, unified hunks with 3 lines of context, and `GIT binary patch`
 * literals (zlib-deflated, git's base85) for binaries — everything `git apply` needs to rebuild
 * the new tree from the old one byte for byte. Formats follow git's `diff.c` (`builtin_diff`,
 * `fill_metainfo`, `emit_binary_diff_body`), `base85.c` and `quote.c`.
 */
import { deflateSync } from 'node:zlib';
import { readBlob, type TreeEntryMode, type TreeValue } from '../git-object.js';
import type { ObjectStore } from '../object-store.js';
import { NULL_OID } from '../ids.js';
import { isBinaryContent } from '../text-merge.js';
import { diffContents, rangeStart, type RawHunk } from './line-diff.js';
import { changedFiles, type FileChange } from './tree-changes.js';


/** Sides larger than this are written as binary literals without trying a line diff. */
export const PATCH_TEXT_MAX_BYTES = 16 * 1024 * 1024;

export interface PatchSide {
  path: string;
  mode: Exclude<TreeEntryMode, '40000'>;
  oid: string;
}

/** One changed path: `before` null when added, `after` null when deleted. */
export interface PatchChange {
  before: PatchSide | null;
  after: PatchSide | null;
}

/** Reads a blob's bytes (a gitlink side is read as git shows it: `Subproject commit <oid>`). */
export type ContentReader = (side: PatchSide) => Uint8Array;

export function sideContent(side: PatchSide, readBlob: (oid: string) => Uint8Array): Uint8Array {
  return side.mode === '160000' ? Buffer.from(`Subproject commit ${side.oid}\n`) : readBlob(side.oid);
}

// ---- names -----------------------------------------------------------------------------------

const ESCAPES: Record<number, string> = { 7: 'a', 8: 'b', 9: 't', 10: 'n', 11: 'v', 12: 'f', 13: 'r', 34: '"', 92: '\\' };

/**
 * git's `quote_c_style` with `core.quotePath` on: a name with a control character, `"`, `\`,
 * DEL or any non-ASCII byte is written in double quotes with C escapes (octal for bytes).
 */
export function quoteName(name: string): string {
  const bytes = Buffer.from(name, 'utf8');
  if (!bytes.some((b) => b < 0x20 || b === 0x22 || b === 0x5c || b >= 0x7f)) return name;
  let out = '"';
  for (const b of bytes) {
    if (ESCAPES[b]) out += `\\${ESCAPES[b]}`;
    else if (b < 0x20 || b >= 0x7f) out += `\\${b.toString(8).padStart(3, '0')}`;
    else out += String.fromCharCode(b);
  }
  return `${out}"`;
}

// ---- binary literals -------------------------------------------------------------------------

const EN85 = Buffer.from('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~', 'latin1');

/**
 * One `literal <size>` block: the content deflated (zlib format), cut into lines of at most 52
 * bytes, each line a length character (`A`–`Z` = 1–26, `a`–`z` = 27–52) and the bytes in
 * base85 (4 bytes → 5 characters, big-endian, the last group zero-padded), then an empty line.
 */
export function binaryLiteral(content: Uint8Array): Buffer {
  const data = deflateSync(content);
  const head = Buffer.from(`literal ${content.length}\n`, 'latin1');
  const fullLines = Math.floor(data.length / 52);
  const rest = data.length % 52;
  const lineBytes = (n: number): number => 1 + Math.ceil(n / 4) * 5 + 1;
  const out = Buffer.allocUnsafe(head.length + fullLines * lineBytes(52) + (rest ? lineBytes(rest) : 0) + 1);
  head.copy(out, 0);
  let o = head.length;
  for (let pos = 0; pos < data.length; pos += 52) {
    const n = Math.min(52, data.length - pos);
    out[o++] = n <= 26 ? 0x41 + n - 1 : 0x61 + n - 27;
    for (let i = 0; i < n; i += 4) {
      let acc = 0;
      for (let k = 0; k < 4; k++) acc = acc * 256 + (i + k < n ? data[pos + i + k]! : 0);
      for (let d = 4; d >= 0; d--) {
        out[o + d] = EN85[acc % 85]!;
        acc = Math.floor(acc / 85);
      }
      o += 5;
    }
    out[o++] = 0x0a;
  }
  out[o++] = 0x0a;
  return out;
}

// ---- hunks -----------------------------------------------------------------------------------

function range(start: number, lines: number): string {
  const s = rangeStart(start, lines);
  return lines === 1 ? `${s}` : `${s},${lines}`;
}

/** Hunks as patch text; lines are latin1 strings (one character per byte). */
export function hunksText(hunks: readonly RawHunk[]): string {
  let text = '';
  for (const h of hunks) {
    text += `@@ -${range(h.oldStart, h.oldLines)} +${range(h.newStart, h.newLines)} @@\n`;
    for (const line of h.lines) text += `${line}\n`;
  }
  return text;
}

// ---- one file --------------------------------------------------------------------------------

const typeOf = (mode: string): string => (mode === '120000' ? 'link' : mode === '160000' ? 'gitlink' : 'file');

/**
 * Appends the patch of one change to `out`. A change of file type (file ↔ symlink ↔ gitlink)
 * is written as git writes it: a deletion followed by a creation.
 */
export function writeChangePatch(change: PatchChange, read: ContentReader, out: Buffer[]): void {
  const { before, after } = change;
  if (before && after && typeOf(before.mode) !== typeOf(after.mode)) {
    writeChangePatch({ before, after: null }, read, out);
    writeChangePatch({ before: null, after }, read, out);
    return;
  }
  const oldName = `a/${(before ?? after)!.path}`;
  const newName = `b/${(after ?? before)!.path}`;
  let header = `diff --git ${quoteName(oldName)} ${quoteName(newName)}\n`;
  if (!before) header += `new file mode ${after!.mode}\n`;
  else if (!after) header += `deleted file mode ${before.mode}\n`;
  else if (before.mode !== after.mode) header += `old mode ${before.mode}\nnew mode ${after.mode}\n`;
  // Renames are detected for identical content only (tree-changes.ts).
  if (before && after && before.path !== after.path) {
    header += `similarity index 100%\nrename from ${quoteName(before.path)}\nrename to ${quoteName(after.path)}\n`;
  }
  const oldOid = before?.oid ?? NULL_OID;
  const newOid = after?.oid ?? NULL_OID;
  if (oldOid === newOid) {
    out.push(Buffer.from(header, 'latin1'));
    return;
  }
  header += `index ${oldOid}..${newOid}${before && after && before.mode === after.mode ? ` ${after.mode}` : ''}\n`;
  const oldContent = before ? read(before) : new Uint8Array(0);
  const newContent = after ? read(after) : new Uint8Array(0);
  const textual =
    oldContent.length <= PATCH_TEXT_MAX_BYTES && newContent.length <= PATCH_TEXT_MAX_BYTES && !isBinaryContent(oldContent) && !isBinaryContent(newContent);
  const diff = textual ? diffContents(oldContent, newContent) : null;
  if (diff) {
    // An empty file created or deleted has no hunks, and git then writes no file names either.
    if (diff.hunks.length > 0) header += `--- ${before ? quoteName(oldName) : '/dev/null'}\n+++ ${after ? quoteName(newName) : '/dev/null'}\n`;
    out.push(Buffer.from(header, 'latin1'), Buffer.from(hunksText(diff.hunks), 'latin1'));
    return;
  }
  out.push(Buffer.from(`${header}GIT binary patch\n`, 'latin1'), binaryLiteral(newContent), binaryLiteral(oldContent));
}

// ---- whole trees -----------------------------------------------------------------------------

function patchSide(path: string, value: TreeValue | null): PatchSide | null {
  return value ? { path, mode: value.mode as PatchSide['mode'], oid: value.oid } : null;
}

/**
 * The patch from one tree to another (every changed path that `keep` accepts), as pieces to
 * send in order. Renames are written as renames, so `git apply` moves the file.
 */
export function treePatch(store: ObjectStore, beforeTreeOid: string, afterTreeOid: string, keep: (change: FileChange) => boolean = () => true): Buffer[] {
  const out: Buffer[] = [];
  const read: ContentReader = (side) => sideContent(side, (oid) => readBlob(store, oid));
  for (const change of changedFiles(store, beforeTreeOid, afterTreeOid)) {
    if (!keep(change)) continue;
    writeChangePatch({ before: patchSide(change.oldPath ?? change.path, change.before), after: patchSide(change.path, change.after) }, read, out);
  }
  return out;
}
