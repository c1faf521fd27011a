/**
 * Line diffs of two file contents. jsdiff (`diff`, the maintained JavaScript diff library) does
 * the Myers diff; around it, two things git's xdiff also does make it fast enough for a diff of
 * thousands of files:
 * - lines are interned to numbers, and lines that occur in only one of the two files are taken
 *   out before Myers runs (they can never be common, and they are most of a rewrite), so the
 *   edit distance Myers sees — its cost is about (N+M)·D + D² — stays small;
 * - that edit distance is capped (`maxEditLength`); past it the caller falls back (JSON:
 *   `too_large`; patch: a binary literal, which `git apply` takes as well).
 * Hunks are then grouped with 3 lines of context as in a unified diff.
 *
 * Contents are handled as latin1 strings — one character per byte — so lines compare bytewise,
 * any encoding and CRLF endings survive, and a patch written back as latin1 is byte-exact. JSON
 * consumers get each line decoded as UTF-8 (`displayText`).
 */
import { diffArrays } from 'diff';
import { splitLines } from '../text-merge.js';

export const CONTEXT_LINES = 3;

/** Largest edit distance (of the lines both files have) Myers may explore: ≈ 0.4 s. */
export const MAX_EDITS = 1000;
/** Bound on (N+M)·D for the same reason, for very long files. */
export const DIFF_COST_BUDGET = 20_000_000;

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

/** The pairs (old index, new index) of common lines, or null when too costly to find. */
function commonLines(a: readonly string[], b: readonly string[]): Array<[number, number]> | null {
  const ids = new Map<string, number>();
  const intern = (line: string): number => {
    let id = ids.get(line);
    if (id === undefined) ids.set(line, (id = ids.size));
    return id;
  };
  const aIds = a.map(intern);
  const bIds = b.map(intern);
  const inA = new Uint8Array(ids.size);
  const inB = new Uint8Array(ids.size);
  for (const id of aIds) inA[id] = 1;
  for (const id of bIds) inB[id] = 1;
  const keptA: number[] = [];
  const keptB: number[] = [];
  aIds.forEach((id, i) => inB[id] && keptA.push(i));
  bIds.forEach((id, j) => inA[id] && keptB.push(j));
  const pairs: Array<[number, number]> = [];
  if (keptA.length === 0 || keptB.length === 0) return pairs;
  const total = keptA.length + keptB.length;
  const maxEditLength = Math.max(1, Math.min(MAX_EDITS, Math.floor(DIFF_COST_BUDGET / total)));
  const changes = diffArrays(
    keptA.map((i) => aIds[i]!),
    keptB.map((j) => bIds[j]!),
    { maxEditLength },
  );
  if (!changes) return null;
  let pa = 0;
  let pb = 0;
  for (const change of changes) {
    if (change.removed) pa += change.count;
    else if (change.added) pb += change.count;
    else for (let k = 0; k < change.count; k++) pairs.push([keptA[pa++]!, keptB[pb++]!]);
  }
  return pairs;
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
  const a = splitLines(before);
  const b = splitLines(after);
  const pairs = commonLines(a, b);
  if (!pairs) return null;
  return { hunks: hunksOf(editScript(a, b, pairs)), additions: b.length - pairs.length, deletions: a.length - pairs.length };
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
