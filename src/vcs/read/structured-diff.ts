/**
 * The structured diff of API §8 between two (materialized) trees: entries with hunks, renames,
 * omitted reasons and limits, and the head's conflicted paths with their conflict hunks.
 *
 * Decisions the contract leaves open:
 * - the changed paths are those whose materialized entries differ; `entries` and
 *   `conflicted_entries` split them by whether the path is conflicted at head (a conflict the
 *   base already had, unchanged, is not part of the diff);
 * - `size_bytes` is the head side's size (the base side's for a deletion);
 * - `old_path` is set for renames only;
 * - hunk ranges use the unified-diff convention (a zero-line range starts at the line before);
 * - `additions`/`deletions` count the lines of the entries whose hunks were computed
 *   (`file_limit` entries are counted in `entries` only);
 * - `too_large`: the hunks' text exceeds 1 MiB, a side exceeds 8 MiB, the line diff would cost
 *   more than the line diff's bounds, or the response already carries 64 MiB of hunk text (so
 *   3,000 large diffs cannot build a response of gigabytes).
 */
import type { TreeValue } from '../git-object.js';
import type { ObjectStore } from '../object-store.js';
import { conflictHunks, type ConflictHunk } from '../conflict.js';
import type { PathConflict } from '../tree-merge.js';
import { TEXT_MERGE_MAX_BYTES, isBinaryContent, BINARY_SNIFF_BYTES } from '../text-merge.js';
import { changedFiles, type FileChange, type FileChangeStatus } from './tree-changes.js';
import { diffContents, displayText, rangeStart } from './line-diff.js';
import { readBlob } from '../git-object.js';

export type ConflictsMode = 'include' | 'only' | 'exclude';
export type OmittedReason = 'binary' | 'too_large' | 'file_limit';

export const DIFF_ENTRY_LIMIT = 3000;
export const DIFF_ROW_LIMIT = 10_000;
export const DIFF_MAX_BYTES = 1024 * 1024;
/** Sides larger than this are not read for a line diff. */
export const DIFF_READ_MAX_BYTES = 8 * 1024 * 1024;
/** Hunk text one response may carry in all. */
export const DIFF_TOTAL_MAX_BYTES = 64 * 1024 * 1024;

export interface DiffLineJson {
  kind: 'context' | 'added' | 'deleted';
  text: string;
}

export interface DiffHunkJson {
  old_start: number;
  old_lines: number;
  new_start: number;
  new_lines: number;
  lines: DiffLineJson[];
}

export interface DiffEntryJson {
  path: string;
  status: FileChangeStatus;
  old_path: string | null;
  size_bytes: number;
  is_conflicted: false;
  omitted_reason: OmittedReason | null;
  hunks: DiffHunkJson[] | null;
}

export interface ConflictedEntryJson {
  path: string;
  size_bytes: number;
  omitted_reason: OmittedReason | null;
  hunks: ConflictHunk[] | null;
}

export interface DiffStats {
  entries: number;
  additions: number;
  deletions: number;
  changes: number;
  conflicted_entries: number;
  conflicted_hunks: number;
}

export interface StructuredDiff {
  stats: DiffStats;
  truncated: boolean;
  entries: DiffEntryJson[];
  conflicted_entries: ConflictedEntryJson[];
}

export interface DiffReadOptions {
  conflicts: ConflictsMode;
  /** The first bytes of a blob without loading all of it (binary sniffing of large sides). */
  prefix?: (oid: string, length: number) => Uint8Array;
  entryLimit?: number;
  rowLimit?: number;
}

const KIND = { ' ': 'context', '+': 'added', '-': 'deleted' } as const;

function sizeOf(store: ObjectStore, value: TreeValue | null): number {
  if (!value || value.mode === '160000') return 0;
  return store.size(value.oid) ?? 0;
}

function contentOf(store: ObjectStore, value: TreeValue | null): Uint8Array {
  if (!value) return new Uint8Array(0);
  if (value.mode === '160000') return Buffer.from(`Subproject commit ${value.oid}\n`);
  return readBlob(store, value.oid);
}

interface EntryContent {
  omitted: OmittedReason | null;
  hunks: DiffHunkJson[] | null;
  additions: number;
  deletions: number;
  /** Bytes of hunk text. */
  bytes: number;
}

const omit = (omitted: OmittedReason, additions = 0, deletions = 0): EntryContent => ({ omitted, hunks: null, additions, deletions, bytes: 0 });

function entryContent(store: ObjectStore, change: FileChange, options: DiffReadOptions, budget: number): EntryContent {
  const { before, after } = change;
  if (before && after && before.oid === after.oid) return { omitted: null, hunks: [], additions: 0, deletions: 0, bytes: 0 };
  const sides = [before, after];
  if (sides.some((v) => v && v.mode !== '160000' && sizeOf(store, v) > DIFF_READ_MAX_BYTES)) {
    const binary = options.prefix && sides.some((v) => v && v.mode !== '160000' && isBinaryContent(options.prefix!(v.oid, BINARY_SNIFF_BYTES)));
    return omit(binary ? 'binary' : 'too_large');
  }
  const oldContent = contentOf(store, before);
  const newContent = contentOf(store, after);
  if (isBinaryContent(oldContent) || isBinaryContent(newContent)) return omit('binary');
  const diff = diffContents(oldContent, newContent);
  if (!diff) return omit('too_large');
  let bytes = 0;
  const hunks: DiffHunkJson[] = [];
  for (const h of diff.hunks) {
    const lines: DiffLineJson[] = [];
    for (const raw of h.lines) {
      const kind = KIND[raw[0] as keyof typeof KIND];
      if (!kind) continue; // "\ No newline at end of file"
      bytes += raw.length;
      lines.push({ kind, text: displayText(raw.slice(1)) });
    }
    hunks.push({ old_start: rangeStart(h.oldStart, h.oldLines), old_lines: h.oldLines, new_start: rangeStart(h.newStart, h.newLines), new_lines: h.newLines, lines });
  }
  if (bytes > Math.min(DIFF_MAX_BYTES, budget)) return omit('too_large', diff.additions, diff.deletions);
  return { omitted: null, hunks, additions: diff.additions, deletions: diff.deletions, bytes };
}

/** Why a conflict has no hunks (`[]` from conflictHunks), or null when it has them. */
function conflictOmission(store: ObjectStore, conflict: PathConflict): OmittedReason | null {
  const terms = conflict.terms.filter((t): t is TreeValue => t !== null);
  if (terms.some((t) => t.mode !== '100644' && t.mode !== '100755')) return 'binary';
  if (terms.some((t) => (store.size(t.oid) ?? 0) > TEXT_MERGE_MAX_BYTES)) return 'too_large';
  if (terms.some((t) => isBinaryContent(readBlob(store, t.oid).subarray(0, BINARY_SNIFF_BYTES)))) return 'binary';
  return null;
}

/**
 * The diff from `baseTreeOid` to `headTreeOid` (both materialized views, readable from
 * `store`); `headConflicts` are the head's conflicted paths.
 */
export function structuredDiff(
  store: ObjectStore,
  baseTreeOid: string,
  headTreeOid: string,
  headConflicts: readonly PathConflict[],
  options: DiffReadOptions,
): StructuredDiff {
  const entryLimit = options.entryLimit ?? DIFF_ENTRY_LIMIT;
  const rowLimit = options.rowLimit ?? DIFF_ROW_LIMIT;
  const conflictByPath = new Map(headConflicts.map((c) => [c.path, c]));
  const stats: DiffStats = { entries: 0, additions: 0, deletions: 0, changes: 0, conflicted_entries: 0, conflicted_hunks: 0 };
  const entries: DiffEntryJson[] = [];
  const conflicted: ConflictedEntryJson[] = [];
  let detailed = 0;
  let truncated = false;
  let budget = DIFF_TOTAL_MAX_BYTES;

  for (const change of changedFiles(store, baseTreeOid, headTreeOid)) {
    const conflict = conflictByPath.get(change.path);
    if (conflict ? options.conflicts === 'exclude' : options.conflicts === 'only') continue;
    if (conflict) stats.conflicted_entries++;
    else stats.entries++;
    if (entries.length + conflicted.length >= rowLimit) {
      truncated = true;
      continue;
    }
    const size = sizeOf(store, change.after ?? change.before);
    const overLimit = detailed >= entryLimit;
    if (!overLimit) detailed++;
    if (conflict) {
      let hunks: ConflictHunk[] | null = null;
      let omitted: OmittedReason | null = 'file_limit';
      if (!overLimit) {
        hunks = conflictHunks(store, conflict);
        omitted = hunks.length === 0 ? conflictOmission(store, conflict) : null;
        if (omitted) hunks = null;
        stats.conflicted_hunks += hunks?.length ?? 0;
      }
      conflicted.push({ path: change.path, size_bytes: size, omitted_reason: omitted, hunks });
      continue;
    }
    const content = overLimit ? omit('file_limit') : entryContent(store, change, options, budget);
    budget -= content.bytes;
    stats.additions += content.additions;
    stats.deletions += content.deletions;
    entries.push({
      path: change.path,
      status: change.status,
      old_path: change.oldPath,
      size_bytes: size,
      is_conflicted: false,
      omitted_reason: content.omitted,
      hunks: content.hunks,
    });
  }
  stats.changes = stats.additions + stats.deletions;
  return { stats, truncated, entries, conflicted_entries: conflicted };
}
