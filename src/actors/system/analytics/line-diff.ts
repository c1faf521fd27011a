/**
 * Line counts of one file's change, as analytics needs them (API §10): non-blank removed lines,
 * and the 1-based numbers (in the new file) of the non-blank added lines, so note ranges can be
 * laid over them. The lines come from the shared alignment (`vcs/line-alignment.ts`), the same
 * the read side's diffs use; a rewrite past its bounds falls back to a multiset comparison (a
 * line is kept while the old side still has an unused copy of it), which counts a wholesale
 * rewrite the same way and never costs more than one pass over each side.
 */
import { alignLines } from '../../../vcs/line-alignment.js';

export interface LineChanges {
  /** Non-blank lines removed. */
  removed: number;
  /** 1-based line numbers in the new file of the non-blank lines added, ascending. */
  added: number[];
}

const BLANK = /^[ \t\r\n\f\v]*$/;

export function diffLineCounts(before: Uint8Array, after: Uint8Array): LineChanges {
  const result: LineChanges = { removed: 0, added: [] };
  if (before.length === after.length && Buffer.from(before.buffer, before.byteOffset, before.byteLength).equals(after)) return result;
  const { prefixLines, oldLines, newLines, common } = alignLines(before, after);
  const keptOld = new Uint8Array(oldLines.length);
  const keptNew = new Uint8Array(newLines.length);
  if (common) {
    for (const [i, j] of common) {
      keptOld[i] = 1;
      keptNew[j] = 1;
    }
  } else {
    const unused = new Map<string, number>();
    for (const line of oldLines) unused.set(line, (unused.get(line) ?? 0) + 1);
    newLines.forEach((line, j) => {
      const left = unused.get(line) ?? 0;
      if (left === 0) return;
      unused.set(line, left - 1);
      keptNew[j] = 1;
    });
    // Which copies of a line count as kept does not change the count.
    oldLines.forEach((line, i) => {
      const left = unused.get(line) ?? 0;
      if (left > 0) unused.set(line, left - 1);
      else keptOld[i] = 1;
    });
  }
  oldLines.forEach((line, i) => {
    if (!keptOld[i] && !BLANK.test(line)) result.removed++;
  });
  newLines.forEach((line, j) => {
    if (!keptNew[j] && !BLANK.test(line)) result.added.push(prefixLines + j + 1);
  });
  return result;
}
