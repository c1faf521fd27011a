/**
 * Line diffs of two file contents, with jsdiff (`diff`, the maintained JavaScript diff library)
 * doing the Myers diff and the grouping into hunks with 3 lines of context.
 *
 * Contents are diffed as latin1 strings — one character per byte — so lines compare bytewise,
 * any encoding and CRLF endings survive, and a patch written back as latin1 is byte-exact. JSON
 * consumers get each line decoded as UTF-8 (`displayText`).
 */
import { structuredPatch } from 'diff';

export const CONTEXT_LINES = 3;

/**
 * Work allowed for one file diff, in jsdiff's units ((old lines + new lines) × edit distance).
 * Myers costs O((N+M)·D); past this bound a diff is not worth its CPU (≈ 0.3 s) and the caller
 * falls back (JSON: `too_large`; patch: a binary literal, which `git apply` takes as well).
 */
export const DIFF_COST_BUDGET = 40_000_000;

/** A hunk as jsdiff gives it: `lines` start with ' ', '+', '-' or '\' (no newline at end). */
export interface RawHunk {
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

function countLines(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++;
  return text.length > 0 && !text.endsWith('\n') ? n + 1 : n;
}

/** The diff of two contents, or null when it would cost more than the budget. */
export function diffContents(before: Uint8Array, after: Uint8Array, budget = DIFF_COST_BUDGET): LineDiff | null {
  const a = Buffer.from(before.buffer, before.byteOffset, before.byteLength).toString('latin1');
  const b = Buffer.from(after.buffer, after.byteOffset, after.byteLength).toString('latin1');
  if (a === b) return { hunks: [], additions: 0, deletions: 0 };
  const total = countLines(a) + countLines(b);
  const maxEditLength = Math.max(1, Math.floor(budget / Math.max(1, total)));
  // An edit distance can never exceed the line count: no bound needed below it.
  const patch =
    maxEditLength >= total
      ? structuredPatch('a', 'b', a, b, undefined, undefined, { context: CONTEXT_LINES })
      : structuredPatch('a', 'b', a, b, undefined, undefined, { context: CONTEXT_LINES, maxEditLength });
  if (!patch) return null;
  let additions = 0;
  let deletions = 0;
  for (const hunk of patch.hunks) {
    for (const line of hunk.lines) {
      if (line[0] === '+') additions++;
      else if (line[0] === '-') deletions++;
    }
  }
  return { hunks: patch.hunks, additions, deletions };
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
