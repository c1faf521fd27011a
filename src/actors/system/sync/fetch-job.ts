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
 * The pack is read as it streams in (pack-reader.ts, under the limits of upstream-limits.ts) and
 * stored batch by batch (pack-store-sink.ts). Fetched objects are pending under the sync until its pull
 * applies (pending-objects.ts), so what an interrupted or failed fetch leaves behind is collected;
 * a pull refused by the quota takes back what it stored at once.
 */
import type { Storage } from '../../../storage/database.js';
import { changeIdOfCommitOid, getChange } from '../../../storage/change-store.js';
import { isObjectStored } from '../../../storage/git-object-store.js';
import { bookmarksOf, getNotesRef, getTag, tagsOf } from '../../../storage/repo-store.js';
import { ROOT_CHANGE_ID } from '../../../vcs/ids.js';
import { isServiceError } from '../../../errors.js';
import { PackStoreSink, type PackStoreTarget } from './pack-store-sink.js';
import { fetchPack, listUploadRefs } from './git-protocol.js';
import type { Remote } from './git-remote.js';
import { PackError, readPack } from './pack-reader.js';
import type { PulledRefs, RemoteRef } from './pull-apply.js';
import { NOTES_REF, TAG_PREFIX, refFilter, type RefGlobs } from './ref-filter.js';
import { GitProtocolError, SyncFailure } from './sync-errors.js';
import { PULL_PACK_LIMITS } from './upstream-limits.js';

const MAX_HAVES = 256;

/** Whether the repository already holds `oid` as the complete value of a ref. */
function holds(storage: Storage, repoId: string, ref: string, oid: string): boolean {
  const { meta } = storage;
  if (changeIdOfCommitOid(meta, repoId, oid) !== undefined) return true;
  if (ref === NOTES_REF) return getNotesRef(meta, repoId, 'agentblame') === oid;
  if (ref.startsWith(TAG_PREFIX)) return getTag(meta, repoId, ref.slice(TAG_PREFIX.length))?.oid === oid;
  return false;
}

/** Commits whose whole history the repository holds: bookmark tips, tag targets, the notes tip. */
function completeCommits(storage: Storage, repoId: string): string[] {
  const { meta } = storage;
  const out = new Set<string>();
  for (const bookmark of bookmarksOf(meta, repoId)) {
    if (bookmark.change_id === ROOT_CHANGE_ID) continue;
    const change = getChange(meta, repoId, bookmark.change_id);
    if (change) out.add(change.commit_oid);
    if (out.size >= MAX_HAVES) return [...out];
  }
  for (const tag of tagsOf(meta, repoId)) {
    if (tag.target_commit) out.add(tag.target_commit);
    if (out.size >= MAX_HAVES) return [...out];
  }
  const notes = getNotesRef(meta, repoId, 'agentblame');
  if (notes) out.add(notes);
  return [...out];
}

/** A failure of the pack's storing in a sync's words. */
function syncFailureOf(err: unknown): unknown {
  if (err instanceof PackError) return new GitProtocolError(`the upstream sent a bad packfile: ${err.message}`);
  if (isServiceError(err) && err.code === 'QUOTA_EXCEEDED') return new SyncFailure(`QUOTA_EXCEEDED: ${err.message}`, false);
  if (isServiceError(err) && err.code === 'REPO_NOT_FOUND') return new SyncFailure('the repository was deleted during the sync', false);
  return err;
}

export async function fetchUpstream(storage: Storage, remote: Remote, target: PackStoreTarget, globs: RefGlobs): Promise<PulledRefs> {
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
    let sink: PackStoreSink | null = null;
    try {
      sink = new PackStoreSink(storage, target, { maxExpected: PULL_PACK_LIMITS.maxObjects, strict: false });
      await fetchPack(remote, adv, [...wants], completeCommits(storage, repoId), (pack) => readPack(pack, sink!, PULL_PACK_LIMITS));
      await sink.finish();
    } catch (err) {
      await sink?.abandon();
      throw syncFailureOf(err);
    }
    let missing = 0;
    for (const oid of wants) if (!isObjectStored(storage, repoId, oid)) missing++;
    if (missing > 0) throw new GitProtocolError(`the upstream did not send ${missing} of the objects asked for`);
  }
  return { head: adv.symrefs.get('HEAD') ?? null, refs };
}
