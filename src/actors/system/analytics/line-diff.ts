/**
 * Line counts of one file's change, as analytics needs them (API §10): non-blank removed lines,
 * and the 1-based numbers (in the new file) of the non-blank added lines, so note ranges can be
 * laid over them. Lines compare as raw bytes (`splitLines`), like every other diff here.
 *
 * Cost is bounded: the common leading and trailing lines are skipped as bytes (never split into
 * strings: most commits touch a few lines of a long file), the middle is diffed with
 * Myers (jsdiff) up to MAX_EDIT_LENGTH edits, and a larger rewrite falls back to a multiset
 * comparison (a line is kept while the old side still has an unused copy of it), which counts a
 * wholesale rewrite the same way and never costs more than one pass over each side.
 */
import { diffArrays } from 'diff';
import { splitLines } from '../../../vcs/text-merge.js';

export const MAX_EDIT_LENGTH = 2000;

export interface LineChanges {
  /** Non-blank lines removed. */
  removed: number;
  /** 1-based line numbers in the new file of the non-blank lines added, ascending. */
  added: number[];
}

const BLANK = /^[ \t\r\n\f\v]*$/;

const NEWLINE = 0x0a;

/**
 * The byte range where two contents differ, widened to whole lines: `start` is where the first
 * differing line begins (the same offset in both) and `suffix` the length of the common tail
 * after the last differing line. Unchanged lines are never split into strings.
 */
function differingLines(a: Uint8Array, b: Uint8Array): { start: number; suffix: number } {
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

export function diffLineCounts(before: Uint8Array, after: Uint8Array): LineChanges {
  const result: LineChanges = { removed: 0, added: [] };
  if (before.length === after.length && Buffer.from(before.buffer, before.byteOffset, before.byteLength).equals(after)) return result;
  const { start, suffix } = differingLines(before, after);
  const firstLine = countNewlines(before, start);
  const ids = new Map<string, number>();
  const blank: boolean[] = [];
  const intern = (lines: string[]): number[] =>
    lines.map((line) => {
      let id = ids.get(line);
      if (id === undefined) {
        id = blank.length;
        ids.set(line, id);
        blank.push(BLANK.test(line));
      }
      return id;
    });
  const oldMid = intern(splitLines(before.subarray(start, before.length - suffix)));
  const newMid = intern(splitLines(after.subarray(start, after.length - suffix)));
  if (oldMid.length === 0 || newMid.length === 0) {
    for (const id of oldMid) if (!blank[id]) result.removed++;
    newMid.forEach((id, i) => {
      if (!blank[id]) result.added.push(firstLine + i + 1);
    });
    return result;
  }
  const changes = diffArrays(oldMid, newMid, { maxEditLength: MAX_EDIT_LENGTH });
  if (changes) {
    let line = firstLine;
    for (const change of changes) {
      if (change.removed) {
        for (const id of change.value) if (!blank[id]) result.removed++;
      } else if (change.added) {
        for (const id of change.value) {
          line++;
          if (!blank[id]) result.added.push(line);
        }
      } else line += change.count;
    }
    return result;
  }
  const unused = new Map<number, number>();
  for (const id of oldMid) unused.set(id, (unused.get(id) ?? 0) + 1);
  newMid.forEach((id, i) => {
    const left = unused.get(id) ?? 0;
    if (left > 0) unused.set(id, left - 1);
    else if (!blank[id]) result.added.push(firstLine + i + 1);
  });
  for (const [id, left] of unused) if (!blank[id]) result.removed += left;
  return result;
}
