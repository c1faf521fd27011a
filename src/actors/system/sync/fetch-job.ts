/**
 * The network half of a pull, run by the sync worker: list the upstream's refs, fetch exactly
 * the selected ones that the repository does not hold yet, and store the received objects in the
 * objects database (content-addressed: harmless until a ref points at them). What the repository
 * makes of them is decided later by its own actor (pull-apply.ts).
 *
 * Only objects the repository's refs make complete count as "had": a fetch interrupted halfway
 * leaves stored objects behind whose history may be partial, so the next fetch asks for them again
 * (and the remote resends everything not reachable from our haves). A connectivity check over the
 * received objects makes sure nothing a new commit needs is missing before anything refers to it.
 *
 * Fetched objects are pending under the sync until its pull applies (pending-objects.ts), so what
 * an interrupted or failed fetch leaves behind is collected. Each batch is charged to the org's
 * quota in its own transaction; a batch that does not fit fails the sync and the earlier batches
 * are taken back, so a refused pull keeps nothing.
 */
import { COMMIT_THEN_SYNC, type Storage } from '../../../storage/database.js';
import { isServiceError } from '../../../errors.js';
import { discardFetched } from '../../../storage/blob-collect.js';
import { changeIdOfCommitOid, getChange, objectStore } from '../../../storage/change-store.js';
import { K, under } from '../../../storage/keys.js';
import { ObjectAccounting } from '../../../storage/object-accounting.js';
import type { BookmarkRecord, RepoRecord, TagRecord } from '../../../storage/records.js';
import type { LmdbObjectStore } from '../../../storage/git-object-store.js';
import { parseCommit, parseTree } from '../../../vcs/git-object.js';
import { ROOT_CHANGE_ID } from '../../../vcs/ids.js';
import { fetchPack, listUploadRefs } from './git-protocol.js';
import type { Remote } from './git-remote.js';
import { readPack, type PackObject } from './packfile.js';
import type { PulledRefs, RemoteRef } from './pull-apply.js';
import { NOTES_REF, TAG_PREFIX, refFilter, type RefGlobs } from './ref-filter.js';
import { GitProtocolError, SyncFailure } from './sync-errors.js';

const BATCH_OBJECTS = 2000;
const BATCH_BYTES = 8 * 1024 * 1024;
const MAX_HAVES = 256;

/** Whether the repository already holds `oid` as the complete value of a ref. */
function holds(storage: Storage, repoId: string, ref: string, oid: string): boolean {
  const { meta } = storage;
  if (changeIdOfCommitOid(meta, repoId, oid) !== undefined) return true;
  if (ref === NOTES_REF) return meta.get(K.notes(repoId, 'agentblame')) === oid;
  if (ref.startsWith(TAG_PREFIX)) return (meta.get(K.tag(repoId, ref.slice(TAG_PREFIX.length))) as TagRecord | undefined)?.oid === oid;
  return false;
}

/** Commits whose whole history the repository holds: bookmark tips, tag targets, the notes tip. */
function completeCommits(storage: Storage, repoId: string): string[] {
  const { meta } = storage;
  const out = new Set<string>();
  for (const { value } of meta.getRange(under(['r', repoId, 'bm']))) {
    const bookmark = value as BookmarkRecord;
    if (bookmark.change_id === ROOT_CHANGE_ID) continue;
    const change = getChange(meta, repoId, bookmark.change_id);
    if (change) out.add(change.commit_oid);
    if (out.size >= MAX_HAVES) return [...out];
  }
  for (const { value } of meta.getRange(under(['r', repoId, 'tag']))) {
    const tag = value as TagRecord;
    if (tag.target_commit) out.add(tag.target_commit);
    if (out.size >= MAX_HAVES) return [...out];
  }
  const notes = meta.get(K.notes(repoId, 'agentblame')) as string | undefined;
  if (notes) out.add(notes);
  return [...out];
}

/** The oids an object refers to that must exist for it to be usable (gitlinks excepted). */
function referencesOf(object: PackObject): string[] {
  if (object.type === 'commit') {
    const commit = parseCommit(object.content);
    return [commit.tree, ...commit.parents];
  }
  if (object.type === 'tree') return parseTree(object.content).filter((e) => e.mode !== '160000').map((e) => e.oid);
  if (object.type === 'tag') {
    const m = /^object ([0-9a-f]{40})\n/.exec(object.content.toString('latin1', 0, 48));
    if (!m) throw new GitProtocolError('the upstream sent a malformed tag object');
    return [m[1]!];
  }
  return [];
}

/** Where a fetch stores: the sync it belongs to and the org quota it is charged against. */
export interface FetchTarget {
  repoId: string;
  syncId: string;
  quotaBytes: number;
}

/**
 * Stores a pack's objects in short transactions (other writers wait on the same lock), each batch
 * charged to the quota, and checks connectivity.
 */
async function storePack(storage: Storage, target: FetchTarget, pack: Buffer): Promise<LmdbObjectStore> {
  const { repoId, syncId } = target;
  const repoKey = K.repo(repoId);
  const accounting = new ObjectAccounting(storage.meta, repoId, { kind: 'fetch', syncId }, Date.now());
  /** Objects this fetch stored new, in committed batches (a refusal takes them back). */
  const stored: string[] = [];
  let batchStored: string[] = [];
  const store = objectStore(storage, repoId, {
    observer: {
      stored(oid, size) {
        accounting.stored(oid, size);
        batchStored.push(oid);
      },
      existing: (oid) => accounting.existing(oid),
    },
  });
  const received = new Set<string>();
  const needed = new Set<string>();
  let batch: PackObject[] = [];
  let bytes = 0;
  const flush = async (): Promise<void> => {
    const objects = batch;
    batchStored = [];
    try {
      storage.root.transactionSync(() => {
        // Checked in the same transaction: objects are never written under a deleted repository.
        const repo = storage.meta.get(repoKey) as RepoRecord | undefined;
        if (!repo) throw new SyncFailure('the repository was deleted during the sync', false);
        for (const o of objects) store.write(o.type, o.content);
        accounting.settle(repo.org_id, target.quotaBytes);
        // A batch is megabytes: its sync runs after the write lock is released.
      }, COMMIT_THEN_SYNC);
    } catch (err) {
      if (!isServiceError(err) || err.code !== 'QUOTA_EXCEEDED') throw err;
      discardFetched(storage, repoId, syncId, stored);
      throw new SyncFailure(`QUOTA_EXCEEDED: ${err.message}`, false);
    }
    stored.push(...batchStored);
    batch = [];
    bytes = 0;
    // Let other syncs of this worker make progress between batches.
    await new Promise((resolve) => setImmediate(resolve));
  };
  for (const object of readPack(pack, (oid) => store.read(oid))) {
    received.add(object.oid);
    for (const ref of referencesOf(object)) needed.add(ref);
    batch.push(object);
    bytes += object.content.length;
    if (batch.length >= BATCH_OBJECTS || bytes >= BATCH_BYTES) await flush();
  }
  if (batch.length > 0) await flush();
  for (const oid of needed) {
    if (!received.has(oid) && !store.has(oid)) throw new GitProtocolError(`the upstream sent an incomplete pack (object ${oid} is missing)`);
  }
  return store;
}

export async function fetchUpstream(storage: Storage, remote: Remote, target: FetchTarget, globs: RefGlobs): Promise<PulledRefs> {
  const { repoId } = target;
  const adv = await listUploadRefs(remote);
  const filter = refFilter(globs);
  const refs: RemoteRef[] = [];
  for (const [ref, oid] of adv.refs) if (filter.classify(ref)) refs.push({ ref, oid });
  const wants = new Set<string>();
  for (const { ref, oid } of refs) {
    if (filter.classify(ref)!.selected && !holds(storage, repoId, ref, oid)) wants.add(oid);
  }
  if (wants.size > 0) {
    const pack = await fetchPack(remote, adv, [...wants], completeCommits(storage, repoId));
    const store = await storePack(storage, target, pack);
    for (const oid of wants) if (!store.has(oid)) throw new GitProtocolError(`the upstream did not send object ${oid}`);
  }
  return { head: adv.symrefs.get('HEAD') ?? null, refs };
}
