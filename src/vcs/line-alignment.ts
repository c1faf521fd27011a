/**
 * The one line-diff core: which lines two contents keep in common. The read side turns it into
 * hunks (`read/line-diff.ts`), analytics into line counts (`actors/system/analytics/line-diff.ts`).
 *
 * jsdiff (`diff`, the maintained JavaScript diff library) runs Myers; around it, what git's xdiff
 * also does keeps the cost bounded whatever the files:
 * - the common leading and trailing lines are skipped as bytes, never split into strings (most
 *   changes touch a few lines of a long file);
 * - the remaining lines are interned to numbers, and those that occur on one side only are taken
 *   out before Myers runs (they can never be common, and they are most of a rewrite), so the edit
 *   distance Myers sees — its cost is about (N+M)·D + D² — stays small;
 * - that edit distance is capped; past it there is no alignment and the caller falls back.
 *
 * Lines are latin1 strings — one character per byte — so they compare bytewise and any encoding
 * or CRLF ending survives.
 */
import { diffArrays } from 'diff';
import { splitLines } from './lines.js';

/** Largest edit distance (of the lines both sides have) Myers may explore: ≈ 0.4 s. */
export const MAX_EDITS = 1000;
/** Bound on (N+M)·D for the same reason, for very long files. */
export const DIFF_COST_BUDGET = 20_000_000;

const NEWLINE = 0x0a;

export interface LineAlignment {
  /** Lines before the first difference, the same on both sides. */
  prefixLines: number;
  /** The differing middle of each side, split into lines (the common tail is left out). */
  oldLines: string[];
  newLines: string[];
  /** Pairs (index in `oldLines`, index in `newLines`) of the middle lines kept, ascending; null when finding them would cost more than the bounds allow. */
  common: Array<[number, number]> | null;
}

/**
 * The byte range where two contents differ, widened to whole lines: `start` is where the first
 * differing line begins (the same offset in both) and `suffix` the length of the common tail
 * after the last differing line.
 */
function differingBytes(a: Uint8Array, b: Uint8Array): { start: number; suffix: number } {
  const max = Math.min(a.length, b.length);
  let p = 0;
  while (p < max && a[p] === b[p]) p++;
  let start = p;
  while (start > 0 && a[start - 1] !== NEWLINE) start--;
  let suffix = 0;
  while (suffix < a.length - start && suffix < b.length - start && a[a.length - 1 - suffix] === b[b.length - 1 - suffix]) suffix++;
  const atBoundary = (x: Uint8Array, k: number): boolean => k === 0 || x.length - k === start || x[x.length - k - 1] === NEWLINE;
  while (suffix > 0 && !(atBoundary(a, suffix) && atBoundary(b, suffix))) suffix--;
  return { start, suffix };
}

function countNewlines(x: Uint8Array, end: number): number {
  let n = 0;
  for (let i = 0; i < end; i++) if (x[i] === NEWLINE) n++;
  return n;
}

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

export function alignLines(before: Uint8Array, after: Uint8Array): LineAlignment {
  const { start, suffix } = differingBytes(before, after);
  const oldLines = splitLines(before.subarray(start, before.length - suffix));
  const newLines = splitLines(after.subarray(start, after.length - suffix));
  return { prefixLines: countNewlines(before, start), oldLines, newLines, common: commonLines(oldLines, newLines) };
}
