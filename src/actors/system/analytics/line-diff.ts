/**
 * Line counts of one file's change, as analytics needs them (API §10): non-blank removed lines,
 * and the 1-based numbers (in the new file) of the non-blank added lines, so note ranges can be
 * laid over them. Lines compare as raw bytes (`splitLines`), like every other diff here.
 *
 * Cost is bounded: the common prefix and suffix are stripped first, the middle is diffed with
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

export function diffLineCounts(before: Uint8Array, after: Uint8Array): LineChanges {
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
  const a = intern(splitLines(before));
  const b = intern(splitLines(after));
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const oldMid = a.slice(start, endA);
  const newMid = b.slice(start, endB);
  const result: LineChanges = { removed: 0, added: [] };
  if (oldMid.length === 0 || newMid.length === 0) {
    for (const id of oldMid) if (!blank[id]) result.removed++;
    newMid.forEach((id, i) => {
      if (!blank[id]) result.added.push(start + i + 1);
    });
    return result;
  }
  const changes = diffArrays(oldMid, newMid, { maxEditLength: MAX_EDIT_LENGTH });
  if (changes) {
    let line = start;
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
    else if (!blank[id]) result.added.push(start + i + 1);
  });
  for (const [id, left] of unused) if (!blank[id]) result.removed += left;
  return result;
}
