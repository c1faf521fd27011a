/**
 * Three-way merge of file contents, line by line, with node-diff3 (the maintained diff3
 * implementation; we do not roll our own merge algorithm). Lines are compared as raw bytes, so
 * any encoding, CRLF endings and a missing final newline survive a merge unchanged.
 */
import { diff3Merge } from 'node-diff3';

/** Files larger than this on any side are merged only when two sides are equal. */
export const TEXT_MERGE_MAX_BYTES = 1024 * 1024;
/** Like git: a NUL byte in the first 8 KiB marks a file as binary. */
export const BINARY_SNIFF_BYTES = 8 * 1024;

export function isBinaryContent(content: Uint8Array): boolean {
  const end = Math.min(content.length, BINARY_SNIFF_BYTES);
  for (let i = 0; i < end; i++) if (content[i] === 0) return true;
  return false;
}

/**
 * Lines with their terminators, one string character per byte (latin1), so splitting and
 * joining is lossless and comparison is bytewise.
 */
export function splitLines(content: Uint8Array): string[] {
  const text = Buffer.from(content.buffer, content.byteOffset, content.byteLength).toString('latin1');
  const lines: string[] = [];
  let start = 0;
  for (;;) {
    const nl = text.indexOf('\n', start);
    if (nl < 0) break;
    lines.push(text.slice(start, nl + 1));
    start = nl + 1;
  }
  if (start < text.length) lines.push(text.slice(start));
  return lines;
}

export function joinLines(lines: readonly string[]): Buffer {
  return Buffer.from(lines.join(''), 'latin1');
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

/** Line regions of a merge of texts, without the shortcuts for equal sides. */
export function mergeTextRegions(base: Uint8Array, target: Uint8Array, source: Uint8Array): TextMergeRegion[] {
  const blocks = diff3Merge<string>(splitLines(target), splitLines(base), splitLines(source), { excludeFalseConflicts: true });
  const regions: TextMergeRegion[] = [];
  for (const block of blocks) {
    if (block.ok) {
      const last = regions[regions.length - 1];
      if (last?.kind === 'clean') last.lines.push(...block.ok);
      else regions.push({ kind: 'clean', lines: [...block.ok] });
    } else if (block.conflict) {
      const c = block.conflict;
      regions.push({
        kind: 'conflict',
        base: c.o,
        target: c.a,
        source: c.b,
        baseStart: c.oIndex,
        targetStart: c.aIndex,
        sourceStart: c.bIndex,
      });
    }
  }
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
