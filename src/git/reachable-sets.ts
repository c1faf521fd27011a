/**
 * What git's reachability bitmaps give its own server: a clone that does not walk the whole
 * history again. Each read thread keeps, per repository, the objects its last full clones sent,
 * under the commits they were walked from. An object never changes under its oid and a repository
 * never loses an object a commit reaches, so an entry cannot go stale: a ref that moves only makes
 * new keys.
 *
 * A clone of the same commits sends the kept objects without reading a tree. A clone after a
 * branch moved takes the repository's most recently used entry as the base of its walk
 * (object-walk.ts): it walks the new commits down to the base and sends what they add, then the
 * base's objects — the work of an incremental fetch, not of a clone. A base whose commits the
 * wants do not all reach (a branch rewritten or deleted) is dropped for that walk, which then
 * walks everything.
 *
 * Only requests shaped like a clone use it: no common commits, no shallow boundary, no filter,
 * every want a commit or a tag naming one. A pack sends the commits first, newest first, then
 * the trees and blobs in oid order (which is also the order of their LMDB keys). The entries are
 * bounded in bytes, least recently used first out; each thread has its own, so the first clone of
 * a repository on each thread walks.
 */
import { LruCache } from '../storage/read/lru-cache.js';
import { classifyWants, tagObjects, walkObjects, type WalkRequest } from './object-walk.js';
import type { ObjectGraph } from './object-graph.js';
import type { OidList } from './oid-list.js';
import { SortedOids } from './sorted-oids.js';

export interface ReachableSet {
  /** The commits walked from, sorted. */
  tips: readonly string[];
  /** Every commit reached, newest first: a pack sends them first. */
  commits: OidList;
  /** Every commit, tree and blob reached, the commits flagged. */
  objects: SortedOids;
}

/** A pack's objects: how many, how many of them a kept set gave without a walk, and their oids in the order they go out. */
export interface PackObjects {
  count: number;
  known: number;
  oids: Iterable<string>;
}

/** Memory the entries of one read thread may hold. */
export const REACHABLE_SETS_BYTES = 32 * 1024 * 1024;
/** Entries kept per repository (clones of different branches), most recently used first. */
const SETS_PER_REPO = 4;
const REPOS = 1024;

const sizeOf = (set: ReachableSet): number => set.commits.byteSize + set.objects.byteSize;
const sameTips = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((oid, i) => oid === b[i]);

export class ReachableSets {
  private readonly byRepo: LruCache<ReachableSet[]>;

  constructor(private readonly budget: number) {
    this.byRepo = new LruCache(REPOS, budget, (sets) => sets.reduce((n, set) => n + sizeOf(set), 0));
  }

  /** The entry for exactly these commits (sorted), else the repository's most recently used one as a base. */
  find(repoId: string, tips: readonly string[]): { exact: ReachableSet | null; base: ReachableSet | null } {
    const sets = this.byRepo.get(repoId) ?? [];
    const exact = sets.find((set) => sameTips(set.tips, tips)) ?? null;
    if (exact && exact !== sets[0]) this.byRepo.set(repoId, [exact, ...sets.filter((set) => set !== exact)]);
    return { exact, base: sets[0] ?? null };
  }

  add(repoId: string, set: ReachableSet): void {
    const sets = [set];
    // A repository's entries may take half the budget together (LruCache keeps no larger value).
    let size = sizeOf(set);
    for (const old of this.byRepo.get(repoId) ?? []) {
      if (sets.length === SETS_PER_REPO) break;
      if (sameTips(old.tips, set.tips) || size + sizeOf(old) > this.budget / 2) continue;
      sets.push(old);
      size += sizeOf(old);
    }
    this.byRepo.set(repoId, sets);
  }
}

/** This thread's entries. */
const threadSets = new ReachableSets(REACHABLE_SETS_BYTES);

function* chain(...parts: Iterable<string>[]): Generator<string> {
  for (const part of parts) yield* part;
}

/** What a pack holding `set` sends: the tags, the commits, then the trees and blobs. */
function fromSet(tags: OidList, set: ReachableSet, known: number): PackObjects {
  return { count: tags.length + set.objects.length, known, oids: chain(tags, set.commits, set.objects.unflagged()) };
}

/**
 * The objects of a pack, from this thread's reachable sets when the request is a clone's, else
 * from a walk. Progress is yielded as the walk advances (objects found so far).
 */
export function* packObjects(graph: ObjectGraph, repoId: string, request: WalkRequest, sets: ReachableSets = threadSets): Generator<number, PackObjects> {
  const cloneShaped = request.common.length === 0 && request.grafts.size === 0 && request.filter === null;
  const wants = cloneShaped ? classifyWants(graph, request.wants) : null;
  if (!wants || wants.trees.length > 0 || wants.blobs.length > 0 || wants.commits.length === 0) {
    const walked = yield* walkObjects(graph, request);
    return { count: walked.tags.length + walked.commits.length + walked.objects.length, known: 0, oids: chain(walked.tags, walked.commits, walked.objects) };
  }
  const tips = [...new Set(wants.commits)].sort();
  const { exact, base } = sets.find(repoId, tips);
  if (exact) return fromSet(tagObjects(graph, wants.tags, request.includeTags, (oid) => exact.objects.has(oid)), exact, exact.objects.length);

  const walked = yield* walkObjects(graph, request, base, wants);
  const commitCount = walked.commits.length;
  const added = SortedOids.from(walked.commits.concat(walked.objects), (i) => i < commitCount);
  const used = walked.baseUsed ? base : null;
  const set: ReachableSet = {
    tips,
    commits: used ? walked.commits.concat(used.commits) : walked.commits,
    objects: used ? used.objects.merge(added) : added,
  };
  sets.add(repoId, set);
  return fromSet(walked.tags, set, used?.objects.length ?? 0);
}
