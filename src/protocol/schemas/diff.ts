import { arr, nullable, obj, str, type JsonSchema } from './common.js';

/** The structured diff (API §8). */

const int: JsonSchema = { type: 'integer' };
const omittedReason: JsonSchema = { type: ['string', 'null'], enum: ['binary', 'too_large', 'file_limit', null] };

const hunk = obj({
  old_start: int,
  old_lines: int,
  new_start: int,
  new_lines: int,
  lines: arr(obj({ kind: { type: 'string', enum: ['context', 'added', 'deleted'] }, text: str() })),
});

const conflictSide = nullable(obj({ content: str() }));
/** ConflictHunk (API §6.5). */
export const conflictHunk: JsonSchema = obj({
  hunk_id: str(),
  old_start: int,
  old_lines: int,
  new_start: int,
  new_lines: int,
  base: conflictSide,
  target: conflictSide,
  source: conflictSide,
});

export const diff: JsonSchema = obj({
  base_change_id: str(),
  head_change_id: str(),
  stats: obj({ entries: int, additions: int, deletions: int, changes: int, conflicted_entries: int, conflicted_hunks: int }),
  truncated: { type: 'boolean' },
  entries: arr(
    obj({
      path: str(),
      status: { type: 'string', enum: ['added', 'modified', 'deleted', 'renamed'] },
      old_path: nullable(str()),
      size_bytes: int,
      is_conflicted: { type: 'boolean' },
      omitted_reason: omittedReason,
      hunks: nullable(arr(hunk)),
    }),
  ),
  conflicted_entries: arr(obj({ path: str(), size_bytes: int, omitted_reason: omittedReason, hunks: nullable(arr(conflictHunk)) })),
});

export const responses = { diff };
