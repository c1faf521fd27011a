/**
 * What a pull does to a repository once its objects are stored (API §9): imported commits become
 * changes, branches fast-forward their bookmarks, tags and the agentblame notes ref are recorded.
 * Runs inside the repository actor's command (synchronous, one transaction), so the decisions are
 * made against the exact state they apply to and all of it — changes, bookmarks, events — commits
 * or rolls back as one mutation.
 */
import { bookmarkNameProblem } from '../../../protocol/names.js';
import { repoEventView } from '../../../protocol/views/repository.js';
import { dropPendingOwnedBy } from '../../../storage/pending-objects.js';
import type { BookmarkRecord, SyncRecord, SyncRefStat, TagRecord } from '../../../storage/records.js';
import { getNotesRef, getTag, putNotesRef, putTag } from '../../../storage/repo-store.js';
import { isAncestor } from '../../../vcs/commit-graph.js';
import { ROOT_CHANGE_ID } from '../../../vcs/ids.js';
import type { ObjectStore } from '../../../vcs/object-store.js';
import { CommitImporter } from '../../commands/commit-import.js';
import type { RepoWrite } from '../../commands/repo-writes.js';
import type { CommandContext } from '../../command.js';
import { BRANCH_PREFIX, refFilter } from './ref-filter.js';

export interface RemoteRef {
  ref: string;
  oid: string;
}

export interface PulledRefs {
  /** The upstream's HEAD symref target (`refs/heads/main`), when it advertised one. */
  head: string | null;
  /** Every upstream branch, tag and notes ref, whether selected or not. */
  refs: RemoteRef[];
}

export interface Reconciliation {
  reconciled_commit_count: number;
  touched_change_count: number;
  changes_created_count: number;
  evolog_inserted_count: number;
  invalid_change_id_header_count: number;
  dirty_change_skip_count: number;
}

export interface PushEventUpdate {
  ref: string;
  bookmark: string;
  before: string | null;
  after: string | null;
  action: 'created' | 'updated' | 'deleted';
}

export interface PullOutcome {
  stats: SyncRefStat[];
  updates: PushEventUpdate[];
  reconciliation: Reconciliation;
  /** True when anything in the repository changed (a ref moved or a change was created). */
  changed: boolean;
}

/** Follows tag objects to what they finally point at; null when that is not a commit. */
export function peelToCommit(store: ObjectStore, oid: string): string | null {
  let current = oid;
  for (let depth = 0; depth < 16; depth++) {
    const object = store.read(current);
    if (!object) return null;
    if (object.type === 'commit') return current;
    if (object.type !== 'tag') return null;
    const m = /^object ([0-9a-f]{40})\n/.exec(Buffer.from(object.content).toString('latin1', 0, 48));
    if (!m) return null;
    current = m[1]!;
  }
  return null;
}

function commitOfBookmark(w: RepoWrite, bookmark: BookmarkRecord): string | null {
  if (bookmark.change_id === ROOT_CHANGE_ID) return null;
  return w.findChange(bookmark.change_id)?.commit_oid ?? null;
}

/**
 * Applies a pull through `w` (made with `announceChanges: false`: the caller's one `push` event
 * tells what was imported); the caller finishes `w` when anything changed.
 */
export function applyPull(ctx: CommandContext, w: RepoWrite, sync: SyncRecord, pulled: PulledRefs): PullOutcome {
  const { meta } = ctx.storage;
  const { org, repo, store } = w;
  const filter = refFilter(sync.ref_globs);
  let created = 0;
  const importer = new CommitImporter(w, {
    create(commit) {
      w.adoptNewChange(commit.changeId, commit.oid, commit.parents, commit.isConflicted);
      created++;
    },
  });
  const stats: SyncRefStat[] = [];
  const updates: PushEventUpdate[] = [];
  let refsChanged = false;

  const refs = [...pulled.refs].sort((a, b) => (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0));
  const isCommit = (oid: string): boolean => store.read(oid)?.type === 'commit';

  // First pull into a repository without changes: the default bookmark takes the name of the
  // upstream's default branch (when that branch is pulled), so `default_bookmark` follows it.
  if (pulled.head?.startsWith(BRANCH_PREFIX) && !w.graph.hasChanges()) {
    const headName = pulled.head.slice(BRANCH_PREFIX.length);
    const headRef = refs.find((r) => r.ref === pulled.head);
    const selected = filter.classify(pulled.head)?.selected === true;
    if (headRef && selected && headName !== repo.default_bookmark && bookmarkNameProblem(headName) === null && isCommit(headRef.oid)) {
      const before = { name: repo.name, default_bookmark: repo.default_bookmark, tags: { ...repo.tags } };
      const previous = repo.default_bookmark;
      repo.default_bookmark = headName;
      if (w.bookmark(previous)) w.deleteBookmark(previous);
      ctx.mutation.emit('repo.updated', org, repo, {
        repo: repoEventView(meta, repo),
        before,
        after: { name: repo.name, default_bookmark: repo.default_bookmark, tags: repo.tags },
      });
      refsChanged = true;
    }
  }

  for (const { ref, oid } of refs) {
    const kind = filter.classify(ref);
    if (!kind) continue;
    if (kind.kind === 'branch') {
      const bookmark = bookmarkNameProblem(kind.name) === null ? w.bookmark(kind.name) : undefined;
      const current = bookmark ? commitOfBookmark(w, bookmark) : null;
      if (!kind.selected) {
        stats.push({ name: ref, before: current, after: current, outcome: 'filtered' });
        continue;
      }
      if (bookmarkNameProblem(kind.name) !== null || !isCommit(oid)) {
        stats.push({ name: ref, before: current, after: current, outcome: 'rejected' });
        continue;
      }
      importer.importFrom(oid);
      const targetChange = w.changeOfCommit(oid)!;
      if (!bookmark) {
        w.moveBookmarks([{ name: kind.name, change_id: targetChange, mode: 'create' }]);
        stats.push({ name: ref, before: null, after: oid, outcome: 'updated' });
        updates.push({ ref, bookmark: kind.name, before: null, after: oid, action: 'created' });
        refsChanged = true;
        continue;
      }
      // The bookmark already holds the upstream commit: it is that commit, an earlier commit of
      // the bookmark's own change, or an ancestor of where the bookmark points.
      const contains = current === oid || targetChange === bookmark.change_id || (current !== null && isAncestor(store, oid, current));
      if (contains) {
        stats.push({ name: ref, before: current, after: current, outcome: 'unchanged' });
        continue;
      }
      if (current === null || isAncestor(store, current, oid)) {
        // Fast-forward (checked on commits above; the change-level rule is implied).
        w.moveBookmarks([{ name: kind.name, change_id: targetChange, allow_backwards: true }]);
        stats.push({ name: ref, before: current, after: oid, outcome: 'updated' });
        updates.push({ ref, bookmark: kind.name, before: current, after: oid, action: 'updated' });
        refsChanged = true;
        continue;
      }
      stats.push({ name: ref, before: current, after: current, outcome: 'rejected' });
    } else if (kind.kind === 'tag') {
      const existing = getTag(meta, repo.id, kind.name);
      const before = existing?.oid ?? null;
      if (!kind.selected) {
        stats.push({ name: ref, before, after: before, outcome: 'filtered' });
        continue;
      }
      if (existing) {
        // Tags do not move: a tag that changed upstream is refused, as `git fetch` does.
        stats.push({ name: ref, before, after: before, outcome: existing.oid === oid ? 'unchanged' : 'rejected' });
        continue;
      }
      if (!store.has(oid)) {
        stats.push({ name: ref, before, after: before, outcome: 'rejected' });
        continue;
      }
      const target = peelToCommit(store, oid);
      if (target) importer.importFrom(target);
      const record: TagRecord = { name: kind.name, oid, target_commit: target };
      putTag(meta, repo.id, record);
      stats.push({ name: ref, before: null, after: oid, outcome: 'updated' });
      refsChanged = true;
    } else {
      const before = getNotesRef(meta, repo.id, 'agentblame') ?? null;
      if (before === oid || !isCommit(oid)) {
        stats.push({ name: ref, before, after: before, outcome: before === oid ? 'unchanged' : 'rejected' });
        continue;
      }
      // Notes are rewritten freely by the tools that keep them: the upstream's value wins.
      putNotesRef(meta, repo.id, 'agentblame', oid);
      stats.push({ name: ref, before, after: oid, outcome: 'updated' });
      refsChanged = true;
    }
  }

  // What this sync's fetch stored is kept from now on: the refs imported above reach it (objects
  // that only a refused ref reaches are kept as well; telling them apart would take a walk).
  dropPendingOwnedBy(meta, repo.id, sync.id);
  return {
    stats,
    updates,
    changed: refsChanged || created > 0,
    reconciliation: {
      reconciled_commit_count: created,
      touched_change_count: created,
      changes_created_count: created,
      evolog_inserted_count: created,
      invalid_change_id_header_count: importer.invalidHeaders,
      dirty_change_skip_count: importer.dirtySkips,
    },
  };
}
