/**
 * A push, run by the sync worker (API §9): the repository's bookmarks go to the upstream as
 * branches and its tags as tags, fast-forward only. Each ref is judged here first — filtered,
 * conflicted, already there, not a fast-forward — and only the rest is sent, in one receive-pack
 * request carrying every object the upstream lacks; the upstream may still refuse a ref, which
 * then counts as rejected without failing the others.
 */
import type { Storage } from '../../../storage/database.js';
import { getChange, objectStore } from '../../../storage/change-store.js';
import type { SyncRefStat } from '../../../storage/records.js';
import { bookmarksOf, tagsOf } from '../../../storage/repo-store.js';
import { acknowledgedThrough } from '../../../storage/server-storage.js';
import { repoShard } from '../../../storage/shards.js';
import type { LmdbObjectStore } from '../../../storage/git-object-store.js';
import { isAncestor } from '../../../vcs/commit-graph.js';
import { EMPTY_TREE_OID, readCommit, readTree } from '../../../vcs/git-object.js';
import { ROOT_CHANGE_ID } from '../../../vcs/ids.js';
import type { GitObject } from '../../../vcs/object-store.js';
import { listReceiveRefs, pushPack, type RefCommand } from './git-protocol.js';
import type { Remote } from './git-remote.js';
import { writePack } from './pack-writer.js';
import { peelToCommit } from './pull-apply.js';
import { BRANCH_PREFIX, TAG_PREFIX, refFilter, type RefGlobs } from './ref-filter.js';
import { GitProtocolError } from './sync-errors.js';

interface LocalRef {
  ref: string;
  oid: string;
  kind: 'branch' | 'tag';
  conflicted: boolean;
}

function localRefs(storage: Storage, repoId: string): LocalRef[] {
  const { meta } = storage;
  const out: LocalRef[] = [];
  for (const bookmark of bookmarksOf(meta, repoId)) {
    // A bookmark at the virtual root has no commit to push.
    if (bookmark.change_id === ROOT_CHANGE_ID) continue;
    const change = getChange(meta, repoId, bookmark.change_id);
    if (change) out.push({ ref: BRANCH_PREFIX + bookmark.name, oid: change.commit_oid, kind: 'branch', conflicted: change.is_conflicted });
  }
  for (const tag of tagsOf(meta, repoId)) {
    out.push({ ref: TAG_PREFIX + tag.name, oid: tag.oid, kind: 'tag', conflicted: false });
  }
  return out;
}

function isCommitIn(store: LmdbObjectStore, oid: string): boolean {
  return store.info(oid)?.type === 'commit';
}

/**
 * The objects the upstream needs for `tips`, given the upstream tips we also hold: new commits
 * (walking down until a commit the upstream has), their trees and blobs minus those of the
 * boundary commits the upstream has (git's "objects-edge"), and tag objects.
 */
export function objectsToSend(store: LmdbObjectStore, tips: readonly string[], remoteTips: readonly string[]): string[] {
  const remoteCommits = new Set<string>();
  const stack: string[] = [];
  for (const tip of remoteTips) {
    const commit = store.has(tip) ? peelToCommit(store, tip) : null;
    if (commit) stack.push(commit);
  }
  while (stack.length > 0) {
    const oid = stack.pop()!;
    if (remoteCommits.has(oid) || !store.has(oid)) continue;
    remoteCommits.add(oid);
    for (const parent of readCommit(store, oid).parents) stack.push(parent);
  }

  const out: string[] = [];
  const seen = new Set<string>();
  const newCommits: string[] = [];
  const edges = new Set<string>();
  for (let tip of tips) {
    // Tag objects (possibly tags of tags) down to what they point at.
    while (store.info(tip)?.type === 'tag') {
      if (!seen.has(tip)) {
        seen.add(tip);
        out.push(tip);
      }
      const m = /^object ([0-9a-f]{40})\n/.exec(Buffer.from(store.read(tip)!.content).toString('latin1', 0, 48));
      if (!m) throw new GitProtocolError(`tag object ${tip} is malformed`);
      tip = m[1]!;
    }
    if (isCommitIn(store, tip)) stack.push(tip);
  }
  while (stack.length > 0) {
    const oid = stack.pop()!;
    if (seen.has(oid)) continue;
    if (remoteCommits.has(oid)) {
      edges.add(oid);
      continue;
    }
    seen.add(oid);
    out.push(oid);
    newCommits.push(oid);
    for (const parent of readCommit(store, oid).parents) stack.push(parent);
  }

  const excluded = new Set<string>();
  const walkTree = (treeOid: string, into: (oid: string) => boolean): void => {
    const trees = [treeOid];
    while (trees.length > 0) {
      const tree = trees.pop()!;
      if (!into(tree)) continue;
      for (const entry of readTree(store, tree)) {
        if (entry.mode === '160000') continue;
        if (entry.mode === '40000') trees.push(entry.oid);
        else into(entry.oid);
      }
    }
  };
  const exclude = (oid: string): boolean => {
    if (excluded.has(oid)) return false;
    excluded.add(oid);
    return true;
  };
  for (const edge of edges) walkTree(readCommit(store, edge).tree, exclude);
  const include = (oid: string): boolean => {
    if (excluded.has(oid) || seen.has(oid)) return false;
    seen.add(oid);
    out.push(oid);
    return true;
  };
  for (const oid of newCommits) walkTree(readCommit(store, oid).tree, include);
  return out;
}

function loadObject(store: LmdbObjectStore, oid: string): GitObject {
  const object = store.read(oid);
  if (object) return object;
  // readTree never stores the empty tree; it exists without being written.
  if (oid === EMPTY_TREE_OID) return { type: 'tree', content: new Uint8Array(0) };
  throw new GitProtocolError(`object ${oid} is missing from the repository`);
}

export async function pushUpstream(storage: Storage, remote: Remote, repoId: string, globs: RefGlobs): Promise<SyncRefStat[]> {
  const adv = await listReceiveRefs(remote);
  const filter = refFilter(globs);
  const store = objectStore(storage, repoId);
  const stats = new Map<string, SyncRefStat>();
  const commands: RefCommand[] = [];

  for (const local of localRefs(storage, repoId)) {
    const before = adv.refs.get(local.ref) ?? null;
    const stat = (outcome: SyncRefStat['outcome'], after: string | null = before): void => {
      stats.set(local.ref, { name: local.ref, before, after, outcome });
    };
    if (!filter.classify(local.ref)?.selected) stat('filtered');
    else if (local.conflicted) stat('rejected');
    else if (before === local.oid) stat('unchanged');
    else if (before === null) commands.push({ ref: local.ref, old: null, new: local.oid });
    else if (local.kind === 'tag') stat('rejected');
    else if (isCommitIn(store, before) && isAncestor(store, before, local.oid)) commands.push({ ref: local.ref, old: before, new: local.oid });
    else if (isCommitIn(store, before) && isAncestor(store, local.oid, before)) stat('unchanged');
    else stat('rejected');
  }

  if (commands.length > 0) {
    const remoteTips = [...new Set(adv.refs.values())];
    const oids = objectsToSend(store, commands.map((c) => c.new), remoteTips);
    const pack = writePack(oids.map((oid) => loadObject(store, oid)));
    // What leaves for the upstream must be in the shard log first (cluster mode), as a read is.
    await acknowledgedThrough(storage, repoShard(repoId));
    const reports = await pushPack(remote, adv, commands, pack);
    for (const c of commands) {
      const report = reports.get(c.ref);
      stats.set(c.ref, report?.ok ? { name: c.ref, before: c.old, after: c.new, outcome: 'updated' } : { name: c.ref, before: c.old, after: c.old, outcome: 'rejected' });
    }
  }
  return [...stats.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
