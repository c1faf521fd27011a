/**
 * The CPU-heavy reads (API §5.1, §7–8, §14) that run on the read pool's threads: materializing a
 * conflicted commit, large content JSON and deep listings, diffs, a change's files, and git's
 * upload-pack. Each works on a fresh LMDB read of the commits the front end resolved
 * (`ChangeRef`), so a change that evolves meanwhile cannot mix two states into one answer; a
 * change's files are read from one snapshot, the change looked up again there.
 */
import type { MessagePort } from 'node:worker_threads';
import { asServiceError, ServiceError, type ServiceErrorData } from '../errors.js';
import { uploadPack, type UploadPackRequest } from '../git/upload-pack.js';
import { log } from '../log.js';
import { PortSink, StreamCancelled } from './read-stream.js';
import { readBlob } from '../vcs/git-object.js';
import { treePatch } from '../vcs/read/git-patch.js';
import { structuredDiff, type ConflictsMode } from '../vcs/read/structured-diff.js';
import type { FileChange } from '../vcs/read/tree-changes.js';
import type { MemoryObjectStore } from '../vcs/memory-object-store.js';
import { serialize } from '../protocol/serializers.js';
import type { Storage } from '../storage/database.js';
import { materializeCommit, openChangeView, shipView, type ChangeRef, type ChangeView, type ShippedView } from '../storage/read/change-view.js';
import { changeDetail } from '../storage/read/change-detail.js';
import { contentJson, type ContentRequest } from '../storage/read/content.js';
import { LayeredObjectStore } from '../storage/read/layered-object-store.js';
import { ReadObjectStore } from '../storage/read/repo-objects.js';

export type DiffFormat = 'json' | 'text';

export type ReadTask =
  | { kind: 'materialize'; repoId: string; commitOid: string }
  | { kind: 'content'; repoId: string; ref: ChangeRef; request: ContentRequest }
  | { kind: 'diff'; repoId: string; base: ChangeRef; head: ChangeRef; conflicts: ConflictsMode; format: DiffFormat }
  | { kind: 'change-detail'; repoId: string; changeId: string };

/** A task whose answer streams back through `port` (read-stream.ts). */
export type StreamTask = { kind: 'upload-pack'; request: UploadPackRequest };

/** A task's answer as it crosses the thread boundary: serialized bytes, a view, or an error. */
export type ReadOutcome = Uint8Array | { view: ShippedView } | { error: ServiceErrorData };

function view(storage: Storage, repoId: string, ref: ChangeRef): ChangeView {
  return openChangeView(storage, repoId, ref, { materialize: true })!;
}

function diffBody(storage: Storage, task: Extract<ReadTask, { kind: 'diff' }>): Uint8Array {
  const base = view(storage, task.repoId, task.base);
  const head = view(storage, task.repoId, task.head);
  const objects = new ReadObjectStore(storage, task.repoId);
  const materialized = [base.materialized, head.materialized].filter((m): m is MemoryObjectStore => m !== null);
  const store = new LayeredObjectStore(objects, undefined, materialized);
  if (task.format === 'text') {
    const keep = (c: FileChange): boolean => (head.conflictPaths.has(c.path) ? task.conflicts !== 'exclude' : task.conflicts !== 'only');
    return Buffer.concat(treePatch(store, base.treeOid, head.treeOid, keep));
  }
  const diff = structuredDiff(store, base.treeOid, head.treeOid, head.conflicts, {
    conflicts: task.conflicts,
    prefix: (oid, length) => (objects.has(oid) ? objects.prefix(oid, length) : readBlob(store, oid).subarray(0, length)),
  });
  return Buffer.from(serialize('diff', { base_change_id: task.base.changeId, head_change_id: task.head.changeId, ...diff }));
}

function contentBody(storage: Storage, task: Extract<ReadTask, { kind: 'content' }>): Uint8Array {
  const json = contentJson(storage, task.repoId, view(storage, task.repoId, task.ref), task.request);
  return Buffer.from(serialize(json.type === 'dir' ? 'contentDir' : 'contentFile', json));
}

export function runReadTask(storage: Storage, task: ReadTask): ReadOutcome {
  try {
    switch (task.kind) {
      case 'materialize':
        return { view: shipView(task.repoId, task.commitOid, materializeCommit(storage, task.repoId, task.commitOid)) };
      case 'content':
        return contentBody(storage, task);
      case 'diff':
        return diffBody(storage, task);
      case 'change-detail':
        return Buffer.from(serialize('changeDetail', changeDetail(storage, task.repoId, task.changeId)));
    }
  } catch (err) {
    const known = asServiceError(err);
    if (known) return { error: known.toJSON() };
    throw err;
  }
}

/**
 * Runs a streaming task into its port. Whatever happens the port is ended, failed or closed: a
 * failure before the first byte reaches the client as an HTTP error, a later one cuts the
 * response short; a client that went away just stops the task.
 */
export async function runStreamTask(storage: Storage, task: StreamTask, port: MessagePort): Promise<void> {
  const sink = new PortSink(port);
  try {
    await uploadPack(storage, task.request, sink);
    sink.end();
  } catch (err) {
    if (err instanceof StreamCancelled || sink.isCancelled) sink.close();
    else {
      const known = asServiceError(err);
      if (!known || known.status >= 500) log.error('read stream failed', { err });
      sink.fail(known ?? new ServiceError('INTERNAL_ERROR', 'internal error'));
    }
  }
}

/** Turns an outcome back into a value or a thrown ServiceError (front-end side). */
export function unwrapOutcome(outcome: ReadOutcome): Uint8Array | ShippedView {
  if (outcome instanceof Uint8Array) return outcome;
  if ('error' in outcome) throw ServiceError.fromJSON(outcome.error);
  return outcome.view;
}
