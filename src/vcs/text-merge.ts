/**
 * Three-way merge of file contents, line by line, as diff3 does it: each side is aligned with the
 * base (the bounded two-way alignment of `line-alignment.ts`), the places where a side differs
 * from the base become hunks, and hunks of both sides that overlap or touch form a conflict
 * region unless both sides wrote the same lines there.
 *
 * node-diff3 did this before; its longest-common-subsequence scan is cubic in repeated lines (a
 * file of 2,000 blank lines with a line added at each end took 30 s, holding the repository's
 * thread). The shared alignment costs about (N+M)·D, and past its bounds a side's whole differing
 * middle becomes one hunk: coarser regions, never a wrong merge.
 */
import { alignLines } from './line-alignment.js';
import { joinLines, splitLines } from './lines.js';

/** Files larger than this on any side are merged only when two sides are equal. */
export const TEXT_MERGE_MAX_BYTES = 1024 * 1024;
/** Like git: a NUL byte in the first 8 KiB marks a file as binary. */
export const BINARY_SNIFF_BYTES = 8 * 1024;

export function isBinaryContent(content: Uint8Array): boolean {
  const end = Math.min(content.length, BINARY_SNIFF_BYTES);
  for (let i = 0; i < end; i++) if (content[i] === 0) return true;
  return false;
}

/** A region both sides changed differently. Starts are 0-based line indexes in each input. */
export interface TextConflictRegion {
  base: string[];
  target: string[];
  source: string[];
  baseStart: number;
  targetStart: number;
  sourceStart: number;
}

export type TextMergeRegion = { kind: 'clean'; lines: string[] } | ({ kind: 'conflict' } & TextConflictRegion);

export type TextMergeResult =
  | { kind: 'clean'; content: Uint8Array }
  /** Clean regions and conflict regions in file order. */
  | { kind: 'conflict'; regions: TextMergeRegion[] }
  /** Binary or over the size limit, and no two sides equal: a whole-file conflict. */
  | { kind: 'unmergeable'; reason: 'binary' | 'too_large' };

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
}

/** Why a content cannot be merged line by line, or null when it can. */
export function unmergeableReason(content: Uint8Array): 'binary' | 'too_large' | null {
  if (content.length > TEXT_MERGE_MAX_BYTES) return 'too_large';
  return isBinaryContent(content) ? 'binary' : null;
}

/** `side` replaced the base's lines [oStart, oStart + oLength) by its own [sStart, sStart + sLength). */
interface Hunk {
  side: 'target' | 'source';
  oStart: number;
  oLength: number;
  sStart: number;
  sLength: number;
}

/**
 * Where `side` differs from `base`, in whole-file line numbers, in order. Where a run of equal
 * lines makes the place of an insertion or a deletion ambiguous, it is moved as far down as it
 * goes, as git's diff does, so that both sides' hunks are placed alike.
 */
function hunksOf(baseLines: readonly string[], sideLines: readonly string[], base: Uint8Array, content: Uint8Array, side: Hunk['side']): Hunk[] {
  const hunks = alignedHunks(base, content, side);
  for (let i = 0; i < hunks.length; i++) {
    const h = hunks[i]!;
    // A common line stays between it and the side's next hunk, which the combining below relies on.
    const next = hunks[i + 1];
    const limit = next ? next.oStart - 1 : baseLines.length;
    if (h.oLength === 0 && h.sLength > 0) {
      while (h.oStart < limit && sideLines[h.sStart] === sideLines[h.sStart + h.sLength]) {
        h.oStart++;
        h.sStart++;
      }
    } else if (h.sLength === 0 && h.oLength > 0) {
      while (h.oStart + h.oLength < limit && baseLines[h.oStart] === baseLines[h.oStart + h.oLength]) {
        h.oStart++;
        h.sStart++;
      }
    }
  }
  return hunks;
}

function alignedHunks(base: Uint8Array, content: Uint8Array, side: Hunk['side']): Hunk[] {
  const { prefixLines: p, oldLines, newLines, common } = alignLines(base, content);
  const hunks: Hunk[] = [];
  const add = (o: number, oEnd: number, c: number, cEnd: number): void => {
    if (oEnd > o || cEnd > c) hunks.push({ side, oStart: p + o, oLength: oEnd - o, sStart: p + c, sLength: cEnd - c });
  };
  if (common === null) {
    add(0, oldLines.length, 0, newLines.length);
    return hunks;
  }
  let o = 0;
  let c = 0;
  for (const [oi, ci] of common) {
    add(o, oi, c, ci);
    o = oi + 1;
    c = ci + 1;
  }
  add(o, oldLines.length, c, newLines.length);
  return hunks;
}

function sameLines(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((line, i) => line === b[i]);
}

/** Line regions of a merge of texts, without the shortcuts for equal sides. */
export function mergeTextRegions(base: Uint8Array, target: Uint8Array, source: Uint8Array): TextMergeRegion[] {
  const lines = { base: splitLines(base), target: splitLines(target), source: splitLines(source) };
  // Stable: at the same base line, the target's hunk comes first.
  const hunks = [...hunksOf(lines.base, lines.target, base, target, 'target'), ...hunksOf(lines.base, lines.source, base, source, 'source')].sort((x, y) => x.oStart - y.oStart);
  const regions: TextMergeRegion[] = [];
  const clean = (from: readonly string[], start: number, end: number): void => {
    if (end <= start) return;
    const last = regions[regions.length - 1];
    const into = last?.kind === 'clean' ? last.lines : [];
    for (let i = start; i < end; i++) into.push(from[i]!);
    if (last?.kind !== 'clean') regions.push({ kind: 'clean', lines: into });
  };
  let done = 0;
  for (let i = 0; i < hunks.length; ) {
    const first = hunks[i++]!;
    const regionStart = first.oStart;
    let regionEnd = first.oStart + first.oLength;
    const group = [first];
    // Hunks that overlap or touch the region join it (two insertions at one place conflict).
    while (i < hunks.length && hunks[i]!.oStart <= regionEnd) {
      const next = hunks[i++]!;
      regionEnd = Math.max(regionEnd, next.oStart + next.oLength);
      group.push(next);
    }
    clean(lines.base, done, regionStart);
    done = regionEnd;
    // One side's hunks never touch each other (a common line separates them): one hunk is one side.
    if (group.length === 1) {
      clean(lines[first.side], first.sStart, first.sStart + first.sLength);
      continue;
    }
    // Each side's span over the region: its hunks' span, widened by the base lines around them
    // that it left as they were.
    const span = (side: Hunk['side']): [number, number] => {
      let oFrom = Infinity;
      let oTo = -Infinity;
      let from = Infinity;
      let to = -Infinity;
      for (const h of group) {
        if (h.side !== side) continue;
        oFrom = Math.min(oFrom, h.oStart);
        oTo = Math.max(oTo, h.oStart + h.oLength);
        from = Math.min(from, h.sStart);
        to = Math.max(to, h.sStart + h.sLength);
      }
      return [from - (oFrom - regionStart), to + (regionEnd - oTo)];
    };
    const [tStart, tEnd] = span('target');
    const [sStart, sEnd] = span('source');
    const targetLines = lines.target.slice(tStart, tEnd);
    const sourceLines = lines.source.slice(sStart, sEnd);
    if (sameLines(targetLines, sourceLines)) {
      clean(targetLines, 0, targetLines.length);
      continue;
    }
    regions.push({
      kind: 'conflict',
      base: lines.base.slice(regionStart, regionEnd),
      target: targetLines,
      source: sourceLines,
      baseStart: regionStart,
      targetStart: tStart,
      sourceStart: sStart,
    });
  }
  clean(lines.base, done, lines.base.length);
  return regions;
}

/**
 * Merges `source`'s changes from `base` into `target`. Equal sides short-cut (whatever the size
 * or type); binary or oversized contents are otherwise a whole-file conflict.
 */
export function mergeText(base: Uint8Array, target: Uint8Array, source: Uint8Array): TextMergeResult {
  if (sameBytes(target, source) || sameBytes(base, source)) return { kind: 'clean', content: target };
  if (sameBytes(base, target)) return { kind: 'clean', content: source };
  const reason = unmergeableReason(base) ?? unmergeableReason(target) ?? unmergeableReason(source);
  if (reason) return { kind: 'unmergeable', reason };
  const regions = mergeTextRegions(base, target, source);
  if (regions.every((r) => r.kind === 'clean')) {
    return { kind: 'clean', content: joinLines(regions.flatMap((r) => (r.kind === 'clean' ? r.lines : []))) };
  }
  return { kind: 'conflict', regions };
}
