/**
 * Conflicts as the API shows them (spec §5.2, §6.5): the materialized view of a conflicted tree
 * set, conflict hunks, and resolutions. The storage layout itself is in conflict-layout.ts.
 *
 * Sides are named as the API names them: `target` is the first side (the rebase destination or
 * the merge target), `source` the second (the change's own side, or the merged bookmark), `base`
 * what both came from. A conflict of more than two sides cannot be resolved with `take`.
 *
 * Hunk positions (decided here, spec leaves them open): `old_start`/`old_lines` locate the hunk in
 * the base file and `new_start`/`new_lines` locate its marker block (from `<<<<<<<` to
 * `>>>>>>>` inclusive) in the materialized file; both 1-based, with the unified-diff convention
 * that a zero-line range starts at the line before it.
 */
import { createHash } from 'node:crypto';
import { VcsError } from './errors.js';
import type { ObjectStore } from './object-store.js';
import { readBlob, readTree, writeBlob } from './git-object.js';
import type { TreeValue } from './git-object.js';
import { isConflictLayoutName } from './conflict-layout.js';
import type { TreeSet } from './conflict-layout.js';
import { applyTreeEdits } from './tree-edit.js';
import type { TreeEdit } from './tree-edit.js';
import { listTreeSetConflicts, mergeTreeSet } from './tree-merge.js';
import type { PathConflict, TreeMergeResult } from './tree-merge.js';
import { joinLines, splitLines } from './lines.js';
import { TEXT_MERGE_MAX_BYTES, mergeTextRegions, unmergeableReason } from './text-merge.js';
import type { TextMergeRegion } from './text-merge.js';

export const MARKER_TARGET = '<<<<<<< target';
export const MARKER_BASE = '||||||| base';
export const MARKER_SEPARATOR = '=======';
export const MARKER_SOURCE = '>>>>>>> source';

export interface ConflictHunkSide {
  /** base64 of the side's lines in this hunk. */
  content: string;
}

export interface ConflictHunk {
  hunk_id: string;
  old_start: number;
  old_lines: number;
  new_start: number;
  new_lines: number;
  /** null when that side does not have the file at all. */
  base: ConflictHunkSide | null;
  target: ConflictHunkSide | null;
  source: ConflictHunkSide | null;
}

export interface ConflictWithHunks {
  path: string;
  hunks: ConflictHunk[];
}

/** `details` of a MERGE_CONFLICT error (spec §6.5). */
export interface MergeConflictDetails {
  conflict_paths: string[];
  conflicts: ConflictWithHunks[];
  [key: string]: unknown;
}

export type Take = 'target' | 'source';

export interface HunkResolution {
  hunk_id: string;
  take?: Take;
  content?: string;
  /** How `content` is encoded; UTF-8 text when omitted or null. */
  encoding?: 'base64' | 'utf-8' | null;
}

/** Exactly one of `take`, `content` or `hunks`. */
export interface ConflictResolution {
  path: string;
  take?: Take;
  content?: string;
  encoding?: 'base64' | 'utf-8' | null;
  hunks?: HunkResolution[];
}

// ---- reading a conflict's contents ---------------------------------------------------------

const isRegular = (v: TreeValue | null): boolean => v !== null && (v.mode === '100644' || v.mode === '100755');

/** The three contents of a two-sided text conflict, or null when it is not one. */
function textSides(store: ObjectStore, conflict: PathConflict): { base: Uint8Array; target: Uint8Array; source: Uint8Array } | null {
  if (conflict.terms.length !== 3) return null;
  if (conflict.terms.some((t) => t !== null && !isRegular(t))) return null;
  for (const t of conflict.terms) if (t !== null && (store.size(t.oid) ?? Infinity) > TEXT_MERGE_MAX_BYTES) return null;
  const read = (v: TreeValue | null): Uint8Array => (v ? readBlob(store, v.oid) : new Uint8Array(0));
  const sides = { base: read(conflict.base), target: read(conflict.target), source: read(conflict.source) };
  if (unmergeableReason(sides.base) ?? unmergeableReason(sides.target) ?? unmergeableReason(sides.source)) return null;
  return sides;
}

function regionsOf(store: ObjectStore, conflict: PathConflict): TextMergeRegion[] | null {
  const sides = textSides(store, conflict);
  return sides ? mergeTextRegions(sides.base, sides.target, sides.source) : null;
}

/** The mode a rewritten conflicted file keeps: the first side's that is a regular file. */
function fileModeOf(conflict: PathConflict): '100644' | '100755' {
  for (const v of [conflict.target, conflict.source, conflict.base, ...conflict.terms]) {
    if (v && (v.mode === '100644' || v.mode === '100755')) return v.mode;
  }
  return '100644';
}

const withNewline = (lines: readonly string[]): string[] => {
  const last = lines[lines.length - 1];
  return last === undefined || last.endsWith('\n') ? [...lines] : [...lines.slice(0, -1), `${last}\n`];
};

function markerBlock(target: readonly string[], base: readonly string[], source: readonly string[]): string[] {
  return [
    `${MARKER_TARGET}\n`,
    ...withNewline(target),
    `${MARKER_BASE}\n`,
    ...withNewline(base),
    `${MARKER_SEPARATOR}\n`,
    ...withNewline(source),
    `${MARKER_SOURCE}\n`,
  ];
}

// ---- materialized view ---------------------------------------------------------------------

/**
 * The file shown for a conflicted path, or undefined to keep the first side's entry (directory,
 * symlink, submodule, binary or oversized conflicts have no text form).
 */
function materializedValue(store: ObjectStore, conflict: PathConflict): TreeValue | undefined {
  if (conflict.terms.some((t) => t !== null && (!isRegular(t) || (store.size(t.oid) ?? Infinity) > TEXT_MERGE_MAX_BYTES))) return undefined;
  const contents = conflict.terms.map((t) => (t ? readBlob(store, t.oid) : new Uint8Array(0)));
  if (contents.some((c) => unmergeableReason(c) !== null)) return undefined;
  let lines: string[];
  if (contents.length === 3) {
    const regions = mergeTextRegions(contents[1]!, contents[0]!, contents[2]!);
    lines = regions.flatMap((r) => (r.kind === 'clean' ? r.lines : markerBlock(r.target, r.base, r.source)));
  } else {
    // More than two sides: one block for the whole file, every base between the sides it links.
    lines = [`${MARKER_TARGET}\n`, ...withNewline(splitLines(contents[0]!))];
    for (let i = 1; i < contents.length; i += 2) {
      lines.push(`${MARKER_BASE}\n`, ...withNewline(splitLines(contents[i]!)));
      lines.push(`${MARKER_SEPARATOR}\n`, ...withNewline(splitLines(contents[i + 1]!)));
    }
    lines.push(`${MARKER_SOURCE}\n`);
  }
  return { mode: fileModeOf(conflict), oid: writeBlob(store, joinLines(lines)) };
}

/**
 * The tree every reader sees for a tree set (spec §5.2): the first side's tree with each
 * conflicted text file replaced by diff3-style markers and the layout's `.jjconflict-*` /
 * `JJ-CONFLICT-README` entries hidden. Written to the store (deterministic, so repeated calls
 * write nothing new); a clean tree set is returned as is.
 */
export function materializeTreeSet(store: ObjectStore, trees: TreeSet): string {
  if (trees.length === 1) return trees[0]!;
  const edits: TreeEdit[] = [];
  for (const conflict of listTreeSetConflicts(store, trees)) {
    const value = materializedValue(store, conflict);
    if (value) edits.push({ op: 'set', path: conflict.path, value });
  }
  for (const entry of readTree(store, trees[0]!)) {
    if (isConflictLayoutName(entry.name)) edits.push({ op: 'set', path: entry.name, value: null });
  }
  return applyTreeEdits(store, trees[0]!, edits);
}

// ---- hunks ---------------------------------------------------------------------------------

const base64 = (lines: readonly string[]): string => joinLines(lines).toString('base64');

/** `hunk_id`: a stable hash of the path, the hunk's position and the three sides' contents. */
function hunkId(path: string, region: Extract<TextMergeRegion, { kind: 'conflict' }>): string {
  const hash = createHash('sha256');
  hash.update(`${path}\0${region.baseStart}\0${region.targetStart}\0${region.sourceStart}\0`);
  for (const side of [region.base, region.target, region.source]) hash.update(`${side.length}\0`).update(side.join(''), 'latin1');
  return hash.digest('hex').slice(0, 24);
}

interface HunkWithRegion {
  hunk: ConflictHunk;
  region: Extract<TextMergeRegion, { kind: 'conflict' }>;
}

function hunksWithRegions(conflict: PathConflict, regions: TextMergeRegion[]): HunkWithRegion[] {
  const out: HunkWithRegion[] = [];
  let newLine = 0;
  for (const region of regions) {
    if (region.kind === 'clean') {
      newLine += region.lines.length;
      continue;
    }
    const blockLines = markerBlock(region.target, region.base, region.source).length;
    const side = (value: TreeValue | null, lines: string[]): ConflictHunkSide | null => (value ? { content: base64(lines) } : null);
    out.push({
      region,
      hunk: {
        hunk_id: hunkId(conflict.path, region),
        old_start: region.base.length === 0 ? region.baseStart : region.baseStart + 1,
        old_lines: region.base.length,
        new_start: newLine + 1,
        new_lines: blockLines,
        base: side(conflict.base, region.base),
        target: side(conflict.target, region.target),
        source: side(conflict.source, region.source),
      },
    });
    newLine += blockLines;
  }
  return out;
}

/** The hunks of one conflicted path; `[]` for binary, oversized, non-file or > 2-sided conflicts. */
export function conflictHunks(store: ObjectStore, conflict: PathConflict): ConflictHunk[] {
  const regions = regionsOf(store, conflict);
  return regions ? hunksWithRegions(conflict, regions).map((h) => h.hunk) : [];
}

/** `details` for a MERGE_CONFLICT error: every conflicted path with its hunks. */
export function mergeConflictDetails(store: ObjectStore, conflicts: readonly PathConflict[]): MergeConflictDetails {
  return {
    conflict_paths: conflicts.map((c) => c.path),
    conflicts: conflicts.map((c) => ({ path: c.path, hunks: conflictHunks(store, c) })),
  };
}

// ---- resolutions ---------------------------------------------------------------------------

function decodeContent(content: string, encoding: ConflictResolution['encoding']): Buffer {
  return Buffer.from(content, encoding === 'base64' ? 'base64' : 'utf8');
}

function takeSide(conflict: PathConflict, take: string, where: string): TreeValue | null {
  if (conflict.terms.length > 3) {
    throw new VcsError('invalid-resolution', `${where}: "${conflict.path}" has more than two sides; resolve it with content`, { path: conflict.path });
  }
  if (take === 'target') return conflict.target;
  if (take === 'source') return conflict.source;
  throw new VcsError('invalid-resolution', `${where}: take must be "target" or "source"`, { path: conflict.path });
}

function resolveHunks(
  store: ObjectStore,
  conflict: PathConflict,
  hunks: readonly HunkResolution[],
  where: string,
  allConflicts: readonly PathConflict[],
): TreeValue {
  const regions = regionsOf(store, conflict);
  const known = regions ? hunksWithRegions(conflict, regions) : [];
  const byId = new Map<string, HunkResolution>();
  for (const h of hunks) {
    if (byId.has(h.hunk_id)) throw new VcsError('invalid-resolution', `${where}: hunk ${h.hunk_id} is resolved twice`, { path: conflict.path });
    if ((h.take === undefined) === (h.content === undefined)) {
      throw new VcsError('invalid-resolution', `${where}: hunk ${h.hunk_id} needs exactly one of take or content`, { path: conflict.path });
    }
    byId.set(h.hunk_id, h);
  }
  const missing = known.filter((k) => !byId.has(k.hunk.hunk_id)).map((k) => k.hunk.hunk_id);
  const knownIds = new Set(known.map((k) => k.hunk.hunk_id));
  const unknown = [...byId.keys()].filter((id) => !knownIds.has(id));
  if (known.length === 0 || missing.length > 0 || unknown.length > 0) {
    const why = known.length === 0 ? 'has no hunks (resolve it whole-file)' : 'is not resolved hunk by hunk for every hunk';
    throw new VcsError('conflict', `${where}: "${conflict.path}" ${why}`, {
      ...mergeConflictDetails(store, allConflicts),
      path: conflict.path,
      missing_hunk_ids: missing,
      unknown_hunk_ids: unknown,
    });
  }
  const lines: string[] = [];
  for (const region of regions!) {
    if (region.kind === 'clean') {
      for (const line of region.lines) lines.push(line);
      continue;
    }
    const chosen = byId.get(hunkId(conflict.path, region))!;
    if (chosen.take !== undefined) {
      takeSide(conflict, chosen.take, where);
      for (const line of chosen.take === 'target' ? region.target : region.source) lines.push(line);
    } else {
      lines.push(decodeContent(chosen.content!, chosen.encoding).toString('latin1'));
    }
  }
  return { mode: fileModeOf(conflict), oid: writeBlob(store, joinLines(lines)) };
}

/**
 * Applies resolutions to a conflicted tree set and returns the new tree set (still conflicted
 * when paths remain). Whole-file `take` uses that side's entry (a side without the path deletes
 * it); `content` writes a file; `hunks` must name every hunk of the path (else a `conflict` error
 * with the conflicts in `details`). A path that is not conflicted, a repeated path, or `take` on
 * a conflict of more than two sides → `invalid-resolution`.
 */
export function resolveConflicts(store: ObjectStore, trees: TreeSet, resolutions: readonly ConflictResolution[]): TreeMergeResult {
  const conflicts = listTreeSetConflicts(store, trees);
  const byPath = new Map(conflicts.map((c) => [c.path, c]));
  const seen = new Set<string>();
  const edits: TreeEdit[] = [];
  resolutions.forEach((resolution, index) => {
    const where = `resolutions[${index}]`;
    const conflict = byPath.get(resolution.path);
    if (!conflict) {
      throw new VcsError('invalid-resolution', `${where}: "${resolution.path}" is not conflicted`, { path: resolution.path, conflict_paths: [...byPath.keys()] });
    }
    if (seen.has(resolution.path)) throw new VcsError('invalid-resolution', `${where}: "${resolution.path}" is resolved twice`, { path: resolution.path });
    seen.add(resolution.path);
    const given = [resolution.take, resolution.content, resolution.hunks].filter((x) => x !== undefined).length;
    if (given !== 1) throw new VcsError('invalid-resolution', `${where}: give exactly one of take, content or hunks`, { path: resolution.path });
    let value: TreeValue | null;
    if (resolution.take !== undefined) value = takeSide(conflict, resolution.take, where);
    else if (resolution.content !== undefined) {
      value = { mode: fileModeOf(conflict), oid: writeBlob(store, decodeContent(resolution.content, resolution.encoding)) };
    } else value = resolveHunks(store, conflict, resolution.hunks!, where, conflicts);
    edits.push({ op: 'set', path: conflict.path, value });
  });
  // A resolved path holds the same value in every term, so terms that became equal cancel out;
  // merging again also settles anything the stored set left trivially resolvable.
  return mergeTreeSet(store, trees.map((oid) => applyTreeEdits(store, oid, edits)));
}
