/**
 * Line diffs of two file contents as unified hunks with 3 lines of context, from the shared
 * alignment (`../line-alignment.ts`); past its bounds there is no diff and the caller falls back
 * (JSON: `too_large`; patch: a binary literal, which `git apply` takes as well).
 *
 * Contents are handled as latin1 strings — one character per byte — so a patch written back as
 * latin1 is byte-exact. JSON consumers get each line decoded as UTF-8 (`displayText`).
 */
import { alignLines } from '../line-alignment.js';
import { splitLines } from '../lines.js';

export const CONTEXT_LINES = 3;

export const NO_NEWLINE_MARKER = '\\ No newline at end of file';

/** A unified hunk; `lines` start with ' ', '+', '-', or are the no-newline marker line. */
export interface RawHunk {
  /** 1-based; for a zero-line range, the line after the position (see `rangeStart`). */
  oldStart: number;
  oldLines: number;
  newStart: number;
  newLines: number;
  lines: string[];
}

export interface LineDiff {
  hunks: RawHunk[];
  additions: number;
  deletions: number;
}

interface Op {
  kind: ' ' | '-' | '+';
  /** Index of the line in the old file (for '+': of the next old line). */
  a: number;
  /** Index of the line in the new file (for '-': of the next new line). */
  b: number;
  line: string;
}

function editScript(a: readonly string[], b: readonly string[], pairs: ReadonlyArray<[number, number]>): Op[] {
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  const gapTo = (ai: number, bj: number): void => {
    for (; i < ai; i++) ops.push({ kind: '-', a: i, b: j, line: a[i]! });
    for (; j < bj; j++) ops.push({ kind: '+', a: i, b: j, line: b[j]! });
  };
  for (const [ai, bj] of pairs) {
    gapTo(ai, bj);
    ops.push({ kind: ' ', a: i++, b: j++, line: a[ai]! });
  }
  gapTo(a.length, b.length);
  return ops;
}

function hunksOf(ops: readonly Op[]): RawHunk[] {
  const hunks: RawHunk[] = [];
  let k = 0;
  while (k < ops.length) {
    while (k < ops.length && ops[k]!.kind === ' ') k++;
    if (k === ops.length) break;
    const start = Math.max(0, k - CONTEXT_LINES);
    // Extend while the next change is close enough for the contexts to touch.
    let end = k;
    for (;;) {
      while (end < ops.length && ops[end]!.kind !== ' ') end++;
      let next = end;
      while (next < ops.length && ops[next]!.kind === ' ') next++;
      if (next < ops.length && next - end <= 2 * CONTEXT_LINES) end = next;
      else break;
    }
    const stop = Math.min(ops.length, end + CONTEXT_LINES);
    const hunk: RawHunk = { oldStart: ops[start]!.a + 1, oldLines: 0, newStart: ops[start]!.b + 1, newLines: 0, lines: [] };
    for (let x = start; x < stop; x++) {
      const op = ops[x]!;
      if (op.kind !== '+') hunk.oldLines++;
      if (op.kind !== '-') hunk.newLines++;
      const newline = op.line.endsWith('\n');
      hunk.lines.push(op.kind + (newline ? op.line.slice(0, -1) : op.line));
      if (!newline) hunk.lines.push(NO_NEWLINE_MARKER);
    }
    hunks.push(hunk);
    k = stop;
  }
  return hunks;
}

/** The diff of two contents, or null when it would cost more than the bounds allow. */
export function diffContents(before: Uint8Array, after: Uint8Array): LineDiff | null {
  if (Buffer.from(before.buffer, before.byteOffset, before.byteLength).equals(after)) return { hunks: [], additions: 0, deletions: 0 };
  const { prefixLines, oldLines, newLines, common } = alignLines(before, after);
  if (!common) return null;
  const a = splitLines(before);
  const b = splitLines(after);
  const suffixLines = a.length - prefixLines - oldLines.length;
  const pairs: Array<[number, number]> = [];
  for (let k = 0; k < prefixLines; k++) pairs.push([k, k]);
  for (const [i, j] of common) pairs.push([prefixLines + i, prefixLines + j]);
  for (let k = 0; k < suffixLines; k++) pairs.push([a.length - suffixLines + k, b.length - suffixLines + k]);
  return { hunks: hunksOf(editScript(a, b, pairs)), additions: newLines.length - common.length, deletions: oldLines.length - common.length };
}

/** Unified-diff start of a range: a zero-line range names the line before it (git's `-0,0`). */
export function rangeStart(start: number, lines: number): number {
  return lines === 0 ? start - 1 : start;
}

const NON_ASCII = /[\x80-\xff]/;

/** A latin1-decoded line as text for people: its bytes read as UTF-8. */
export function displayText(latin1: string): string {
  return NON_ASCII.test(latin1) ? Buffer.from(latin1, 'latin1').toString('utf8') : latin1;
}
