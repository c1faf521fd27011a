import { ServiceError, invalid, notFound } from '../../errors.js';
import { VcsError, inOp } from '../../vcs/errors.js';
import type { Attribution } from '../../vcs/commit.js';
import { listTreeSetConflicts, mergeTreeSet } from '../../vcs/tree-merge.js';
import { mergeConflictDetails, resolveConflicts, type ConflictResolution } from '../../vcs/conflict.js';
import type { TreeSet } from '../../vcs/conflict-layout.js';
import { TREE_MODE, readTree, type FileMode, type TreeEntry } from '../../vcs/git-object.js';
import { ROOT_CHANGE_ID } from '../../vcs/ids.js';
import { applyTreeEdits, type TreeEdit } from '../../vcs/tree-edit.js';
import { commitStagedBlob, type StagedBlob } from '../../storage/blob-store.js';
import { storedObjectType } from '../../storage/git-object-store.js';
import { metadataPathRoom, updateFileMetadata } from '../../storage/file-metadata.js';
import { ObjectAccounting, UPLOAD } from '../../storage/object-accounting.js';
import type { ChangeRecord } from '../../storage/records.js';
import { defineCommand, type CommandContext } from '../command.js';
import { RepoWrite, assertNotRebasedWhileWaiting, type AuthorsInput, type BookmarkMoveResult } from './repo-writes.js';
import type { BookmarkMoveInput } from '../../protocol/schemas/changes.js';

/**
 * Writing files into changes: the one code path behind `POST /changes`, `PATCH /changes/{id}`
 * and `POST /apply-ops` (API §5.3, §5.4). The front end has already checked the body's shape and
 * paths, staged large contents (and any past the request's in-memory budget) and encoded the
 * others as the objects to store (in the request's `blobs`); what arrives here is references.
 */
export type WriteOpInput =
  | {
      op: 'write';
      path: string;
      mode?: FileMode | null;
      /** A content the front end staged while the body streamed in. */
      staged?: StagedBlob;
      /** A content the front end hashed and encoded: ActorRequest.blobs[index], the blob `oid`. */
      encoded?: EncodedBlobRef;
      /** A blob of this repository (e.g. from `POST …/blobs`). */
      blob_oid?: string;
    }
  | { op: 'delete'; path: string }
  | { op: 'rename'; from: string; to: string }
  | { op: 'set_metadata'; path: string; metadata: Record<string, string | null> };

export interface EncodedBlobRef {
  index: number;
  oid: string;
}

/** What every write of files into a change carries. */
interface ChangeWriteFields extends AuthorsInput {
  repo_id: string;
  /** Omitted: `""` on create, kept on evolve. */
  message?: string | null;
  ops: WriteOpInput[];
  /** Name of the body's list, for error messages (`ops` or `files`). */
  list_key: 'ops' | 'files';
  resolutions?: ConflictResolution[] | null;
  bookmarks?: BookmarkMoveInput[] | null;
  attribution?: Attribution | null;
}

/** A write evolves `change_id` (optionally guarded by its current commit) or creates a change on `base_change_id`. */
export type ChangeWriteInput = ChangeWriteFields & ({ change_id: string; expected_commit_oid?: string | null } | { base_change_id: string });

export interface BlobStoreInput {
  repo_id: string;
  blob: StagedBlob;
}

export interface WriteResult {
  w: RepoWrite;
  record: ChangeRecord;
  created: boolean;
  bookmarks: BookmarkMoveResult[];
  operationId: string;
}

/** Errors of the tree editor name the edit's index; report the op's index and say so. */
function atOp(err: unknown, listKey: string, opIndexOfEdit: readonly number[]): never {
  if (err instanceof VcsError && typeof err.details?.op_index === 'number') throw inOp(err, listKey, opIndexOfEdit[err.details.op_index] ?? err.details.op_index);
  throw err;
}

function blobOf(w: RepoWrite, op: Extract<WriteOpInput, { op: 'write' }>, where: string, encoded: EncodedBlob | undefined): string {
  if (op.staged) {
    commitStagedBlob(w.ctx.storage, w.repo.id, op.staged, w.accounting);
    return op.staged.oid;
  }
  if (op.blob_oid) {
    const info = w.store.info(op.blob_oid);
    if (!info || info.type !== 'blob') throw notFound('NOT_FOUND', `${where}: blob ${op.blob_oid} not found in this repository`, { blob_oid: op.blob_oid });
    // Named by a write, the uploaded blob is referenced: no longer collectable.
    w.accounting.existing(op.blob_oid);
    return op.blob_oid;
  }
  if (!encoded) throw new ServiceError('INTERNAL_ERROR', `${where}: a write names no content`);
  return w.store.writeEncoded(encoded.oid, encoded.value);
}

/** A blob the front end encoded, as the request carries it. */
interface EncodedBlob {
  oid: string;
  value: Buffer;
}

/** The request's encoded contents, by the index of the op that writes each (none for other ops). */
export type PreparedBlobs = ReadonlyArray<EncodedBlob | undefined>;

/** The `prepare` of every command that writes files into a change: finds each op's blob. */
export function prepareWriteOps(input: ChangeWriteInput, blobs: readonly Uint8Array[]): PreparedBlobs {
  const prepared: Array<EncodedBlob | undefined> = [];
  input.ops.forEach((op, index) => {
    if (op.op === 'write' && op.encoded) prepared[index] = encodedBlob(op.encoded, blobs);
  });
  return prepared;
}

const OID = /^[0-9a-f]{40}$/;

function encodedBlob(ref: EncodedBlobRef, blobs: readonly Uint8Array[]): EncodedBlob {
  const bytes = blobs[ref.index];
  const value = bytes && Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (!value || !OID.test(ref.oid) || storedObjectType(ref.oid, value) !== 'blob') throw new ServiceError('INTERNAL_ERROR', `a write names blob ${ref.index} (${ref.oid}) of its request, which holds no such blob`);
  return { oid: ref.oid, value };
}

/**
 * The mode of the file at `path` in a tree, read through `listings` (each tree parsed once per
 * command: several writes into one directory look up the same trees).
 */
function existingMode(w: RepoWrite, listings: Map<string, Map<string, TreeEntry>>, rootTree: string, path: string): string | undefined {
  let oid = rootTree;
  const segments = path.split('/');
  for (let i = 0; i < segments.length; i++) {
    let listing = listings.get(oid);
    if (!listing) listings.set(oid, (listing = new Map(readTree(w.store, oid).map((e) => [e.name, e]))));
    const entry = listing.get(segments[i]!);
    if (!entry) return undefined;
    if (i === segments.length - 1) return entry.mode;
    if (entry.mode !== TREE_MODE) return undefined;
    oid = entry.oid;
  }
  return undefined;
}

/** Applies the ops' tree edits to `trees` (every term of a conflicted set) and their metadata. */
function applyOps(w: RepoWrite, input: ChangeWriteInput, prepared: PreparedBlobs, trees: TreeSet): TreeSet {
  if (input.ops.length === 0) return trees;
  const listings = new Map<string, Map<string, TreeEntry>>();
  const edits: TreeEdit[] = [];
  const opIndexOfEdit: number[] = [];
  const metadata: Array<{ path: string; values: Record<string, string | null> }> = [];
  input.ops.forEach((op, index) => {
    const where = `${input.list_key}[${index}]`;
    switch (op.op) {
      case 'write': {
        // A rewrite without a mode keeps the file's executable bit.
        const mode: FileMode = op.mode ?? (existingMode(w, listings, trees[0]!, op.path) === '100755' ? '100755' : '100644');
        edits.push({ op: 'write', path: op.path, blobOid: blobOf(w, op, where, prepared[index]), mode });
        break;
      }
      case 'delete':
        edits.push({ op: 'delete', path: op.path });
        break;
      case 'rename':
        edits.push({ op: 'rename', from: op.from, to: op.to });
        break;
      case 'set_metadata': {
        // The path is part of the metadata's key, which LMDB bounds (the file's own path is not).
        const room = metadataPathRoom(w.repo.id);
        if (Buffer.byteLength(op.path) > room) throw invalid(`${where}: metadata can be set only on paths of at most ${room} bytes`, { op_index: index });
        // Ops apply in order: the path must exist where the op stands, whatever later ops do.
        edits.push({ op: 'require', path: op.path, what: 'set metadata of' });
        metadata.push({ path: op.path, values: op.metadata });
        break;
      }
    }
    opIndexOfEdit.push(index);
  });
  let result: TreeSet;
  try {
    result = trees.map((tree) => applyTreeEdits(w.store, tree, edits));
  } catch (err) {
    atOp(err, input.list_key, opIndexOfEdit);
  }
  // Edits made to every term of a conflict resolve the paths they touch (jj's semantics).
  if (result.length > 1) result = mergeTreeSet(w.store, result).trees;
  for (const { path, values } of metadata) updateFileMetadata(w.ctx.storage.meta, w.repo.id, path, values);
  return result;
}

/** The guard of an evolve: 404 when the oid is no commit of the repository, 409 when it lost. */
function checkGuard(w: RepoWrite, record: ChangeRecord, expected: string | null | undefined, field: string): void {
  if (!expected) return;
  if (!w.changeOfCommit(expected)) {
    throw notFound('COMMIT_NOT_FOUND', `${field} ${expected} is not a commit of this repository`, { [field]: expected });
  }
  if (record.commit_oid !== expected) {
    throw new ServiceError('ABORTED', `change ${record.id} is now at ${record.commit_oid}, not ${expected}; read it again and retry`, {
      change_id: record.id,
      current_commit_oid: record.commit_oid,
    });
  }
}

function evolve(w: RepoWrite, input: Extract<ChangeWriteInput, { change_id: string }>, prepared: PreparedBlobs): { record: ChangeRecord } {
  if (input.change_id === ROOT_CHANGE_ID) throw invalid('the virtual root change cannot be evolved');
  const record = w.change(input.change_id);
  checkGuard(w, record, input.expected_commit_oid, input.list_key === 'ops' ? 'expected_commit_oid' : 'base_commit_oid');
  assertNotRebasedWhileWaiting(w.ctx, w.repo.id, record);
  let trees = w.treesOf(record);
  if (input.resolutions && input.resolutions.length > 0) {
    if (!record.is_conflicted) throw invalid(`change ${record.id} has no conflicts to resolve`);
    trees = resolveConflicts(w.store, trees, input.resolutions).trees;
  } else if (record.is_conflicted) {
    const conflicts = listTreeSetConflicts(w.store, trees);
    throw new ServiceError('MERGE_CONFLICT', `change ${record.id} is conflicted in ${conflicts.length} path(s); resolve it with resolutions first`, {
      ...mergeConflictDetails(w.store, conflicts),
      change_id: record.id,
    });
  }
  trees = applyOps(w, input, prepared, trees);
  const replaced = w.replacementAuthors(input);
  const result = w.evolveChange(record, {
    trees,
    authors: replaced?.authors,
    authoredAt: replaced?.authoredAt,
    description: input.message ?? undefined,
    attribution: input.attribution === undefined || input.attribution === null ? undefined : input.attribution,
    committer: input.committer ? w.committerFor(input) : undefined,
  });
  return { record: result.record };
}

function create(w: RepoWrite, input: ChangeWriteInput, prepared: PreparedBlobs, baseId: string): { record: ChangeRecord; defaultMove: BookmarkMoveResult | null } {
  const base = w.changeOrRoot(baseId);
  const firstWrite = w.isFirstWrite(baseId, w.repo.default_bookmark);
  const trees = applyOps(w, input, prepared, w.treesOf(base));
  const { authors, authoredAt } = w.newChangeAuthors(input);
  const record = w.createChange({
    parents: [baseId],
    trees,
    authors,
    authoredAt,
    committer: w.committerFor(input),
    description: input.message ?? '',
    attribution: input.attribution ?? null,
  });
  const explicit = new Set((input.bookmarks ?? []).map((b) => b.name));
  return { record, defaultMove: firstWrite ? w.advanceDefaultBookmark(record, explicit) : null };
}

/** The shared write: create or evolve, then the bookmark moves, then the operation. */
export function writeChange(ctx: CommandContext, input: ChangeWriteInput, prepared: PreparedBlobs, kind: string): WriteResult {
  const w = new RepoWrite(ctx, input.repo_id);
  let record: ChangeRecord;
  let created: boolean;
  const bookmarks: BookmarkMoveResult[] = [];
  if ('change_id' in input) {
    record = evolve(w, input, prepared).record;
    created = false;
  } else {
    const made = create(w, input, prepared, input.base_change_id);
    record = made.record;
    created = true;
    if (made.defaultMove) bookmarks.push(made.defaultMove);
  }
  if (input.bookmarks && input.bookmarks.length > 0) {
    bookmarks.push(
      ...w.moveBookmarks(
        input.bookmarks.map((b) => ({
          name: b.name,
          change_id: record.id,
          allow_backwards: b.allow_backwards,
          expected_change_id: b.expected_change_id,
          mode: b.create ? ('upsert' as const) : ('move' as const),
        })),
      ),
    );
  }
  const operationId = w.finish(kind, {
    change_id: record.id,
    commit_oid: record.commit_oid,
    created,
    bookmarks: bookmarks.map((b) => b.record.name),
  });
  return { w, record, created, bookmarks, operationId };
}

export const applyOpsCommand = defineCommand<ChangeWriteInput, PreparedBlobs>(
  'apply-ops',
  (input, ctx, prepared) => {
    const result = writeChange(ctx, input, prepared, 'apply-ops');
    return {
      status: result.created ? 201 : 200,
      body: { change: result.w.view(result.record), bookmarks: result.bookmarks.map((b) => b.view), operation_id: result.operationId },
      schema: 'applyOpsResult',
    };
  },
  prepareWriteOps,
);

/**
 * `POST …/blobs`: makes a staged upload a blob of the repository, pending until a write names it
 * (collected after the retention otherwise), and charged to the org's quota.
 */
export const storeBlobCommand = defineCommand<BlobStoreInput>('blob.store', (input, ctx) => {
  const w = new RepoWrite(ctx, input.repo_id);
  const upload = new ObjectAccounting(ctx.storage.meta, w.repo.id, UPLOAD, ctx.now.getTime());
  commitStagedBlob(ctx.storage, w.repo.id, input.blob, upload);
  upload.settle(w.org.id, ctx.settings.orgQuotaBytes);
  w.finish('blob.upload', { oid: input.blob.oid, size: input.blob.size });
  return { status: 201, body: { oid: input.blob.oid, size: input.blob.size }, schema: 'blobUpload' };
});
