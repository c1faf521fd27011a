/**
 * A git push landing (API §14), once the receive pool has read and checked its pack
 * (git/receive-pack.ts): ONE operation, in one transaction on the repository's actor, so the
 * push is applied whole or not at all and is acknowledged only once it is on disk. The command
 * decides every ref update against the state it applies to (compare-and-swap on the old oid,
 * the namespaces, the default bookmark, `atomic`), stores the pack's last batch and references
 * its earlier ones, turns the new commits into changes (commit-import.ts: a `change-id` header
 * naming a known change evolves it), rebases the server's descendants of evolved changes as an
 * API evolve does, then moves, creates and deletes bookmarks and tags and emits their events and
 * the `push` event.
 *
 * Pushed commits are kept exactly as pushed (their oids, signatures included): only changes the
 * push did not bring are rebased.
 */
import { ServiceError } from '../../errors.js';
import { bookmarkNameProblem } from '../../protocol/names.js';
import type { PushCommandInput } from '../../git/receive-pack.js';
import { ZERO_OID } from '../../git/receive-request.js';
import type { RefStatus } from '../../git/receive-report.js';
import { discardFetched } from '../../storage/blob-collect.js';
import { commitStagedBlob, removeUploadSync } from '../../storage/blob-store.js';
import { decodeObjectValue, type PreparedObject } from '../../storage/git-object-store.js';
import { dropPendingOwnedBy, pendingOf } from '../../storage/pending-objects.js';
import { getTag, putTag, removeTag } from '../../storage/repo-store.js';
import { ROOT_CHANGE_ID } from '../../vcs/ids.js';
import type { ObjectType } from '../../vcs/object-store.js';
import { peelToCommit, type PushEventUpdate, type Reconciliation } from '../system/sync/pull-apply.js';
import { defineCommand, type CommandContext } from '../command.js';
import { CommitImporter } from './commit-import.js';
import { RepoWrite } from './repo-writes.js';

const HEADS = 'refs/heads/';
const TAGS = 'refs/tags/';

/** The pack's last batch, decoded before the batch takes the write lock. */
function preparePush(input: PushCommandInput): PreparedObject[] {
  return input.objects.map((o) => {
    const value = Buffer.from(o.value, 'base64');
    const info = decodeObjectValue(o.oid, value);
    return { oid: o.oid, type: info.type, content: info.content!, value };
  });
}

type Target = { kind: 'branch'; name: string } | { kind: 'tag'; name: string };

/** The bookmark or tag a ref names, or why it cannot be pushed. */
function targetOf(ref: string): Target | string {
  const kind = ref.startsWith(HEADS) ? 'branch' : ref.startsWith(TAGS) ? 'tag' : null;
  if (!kind) return 'only refs/heads/* and refs/tags/* can be pushed here';
  const name = ref.slice(kind === 'branch' ? HEADS.length : TAGS.length);
  const problem = bookmarkNameProblem(name);
  return problem ? `invalid ${kind} name: ${problem}` : { kind, name };
}

interface Decision {
  ref: string;
  target: Target | null;
  /** The ref's value before the push (null: absent). */
  current: string | null;
  next: string | null;
  error: string | null;
}

export const pushCommand = defineCommand<PushCommandInput, PreparedObject[]>(
  'git.push',
  (input, ctx, objects) => {
    const w = new RepoWrite(ctx, input.repo_id);
    const { meta } = ctx.storage;
    const repoId = w.repo.id;
    const incoming = new Map<string, ObjectType>(objects.map((o) => [o.oid, o.type]));
    for (const blob of input.staged) incoming.set(blob.oid, 'blob');
    const typeOf = (oid: string): ObjectType | undefined => incoming.get(oid) ?? w.store.info(oid)?.type;
    const commitOfBranch = (name: string): string | null => {
      const bookmark = w.bookmark(name);
      if (!bookmark || bookmark.change_id === ROOT_CHANGE_ID) return null;
      return w.findChange(bookmark.change_id)?.commit_oid ?? null;
    };

    const decisions: Decision[] = input.updates.map((update) => {
      const target = targetOf(update.ref);
      const next = update.new === ZERO_OID ? null : update.new;
      const decision: Decision = { ref: update.ref, target: null, current: null, next, error: null };
      if (typeof target === 'string') return { ...decision, error: target };
      decision.target = target;
      decision.current = target.kind === 'branch' ? commitOfBranch(target.name) : getTag(meta, repoId, target.name)?.oid ?? null;
      if ((update.old === ZERO_OID ? null : update.old) !== decision.current) decision.error = 'stale info';
      else if (next === null) {
        if (target.kind === 'branch' && target.name === w.repo.default_bookmark) decision.error = 'refusing to delete the default bookmark; change the default bookmark first';
      } else {
        const type = typeOf(next);
        if (!type) decision.error = 'missing necessary objects';
        else if (target.kind === 'branch' && type !== 'commit') decision.error = `a branch must point at a commit, not a ${type}`;
      }
      return decision;
    });
    if (input.atomic && decisions.some((d) => d.error !== null)) {
      for (const d of decisions) d.error ??= 'atomic push failed';
    }
    const applied = decisions.filter((d) => d.error === null && d.current !== d.next);
    const report = { refs: decisions.map((d): RefStatus => ({ ref: d.ref, error: d.error })) };
    if (applied.length === 0) {
      discardPush(ctx, repoId, input);
      return { status: 200, body: report, schema: 'gitPush' };
    }

    // The objects: the pack's last batch, its earlier batches, and pending objects it names.
    for (const object of objects) w.store.writePrepared(object);
    for (const blob of input.staged) commitStagedBlob(ctx.storage, repoId, blob, w.accounting);
    for (const oid of input.pending_refs) {
      if (!w.store.has(oid)) throw new ServiceError('INVALID_REQUEST', `the pack names ${oid}, which was removed while the push was read`);
      w.accounting.existing(oid);
    }
    if (input.earlier_batches) dropPendingOwnedBy(meta, repoId, input.push_id);

    // The commits: new changes, or the next commits of the changes their headers name.
    const rewritten = new Map<string, { old: string; new: string }>();
    let created = 0;
    const importer = new CommitImporter(w, {
      create(commit) {
        w.adoptNewChange(commit.changeId, commit.oid, commit.parents, commit.isConflicted);
        created++;
        // A pushed commit is kept as it is: never rebased below.
        rewritten.set(commit.changeId, { old: commit.oid, new: commit.oid });
      },
      evolve(existing, commit) {
        w.adoptCommit(existing, commit.oid, commit.parents, commit.isConflicted);
        rewritten.set(existing.id, { old: rewritten.get(existing.id)?.old ?? existing.commit_oid, new: commit.oid });
      },
    });
    for (const d of applied) {
      if (d.next === null) continue;
      const tip = d.target!.kind === 'branch' ? d.next : peelToCommit(w.store, d.next);
      if (tip) importer.importFrom(tip);
    }
    const evolved = [...rewritten.values()].some((r) => r.old !== r.new);
    const rebased = evolved ? w.rebaseDescendantsOf(rewritten) : [];

    // The refs.
    const updates: PushEventUpdate[] = [];
    const landed: Array<{ update: PushEventUpdate; changeId: string }> = [];
    const moves = [];
    for (const d of applied) {
      const { kind, name } = d.target!;
      if (kind === 'tag') {
        if (d.next === null) removeTag(meta, repoId, name);
        else putTag(meta, repoId, { name, oid: d.next, target_commit: peelToCommit(w.store, d.next) });
        continue;
      }
      if (d.next === null) {
        if (w.bookmark(name)) w.deleteBookmark(name);
        updates.push({ ref: d.ref, bookmark: name, before: d.current, after: null, action: 'deleted' });
        continue;
      }
      const changeId = w.changeOfCommit(d.next)!;
      moves.push({ name, change_id: changeId, allow_backwards: true, mode: 'upsert' as const });
      const update: PushEventUpdate = { ref: d.ref, bookmark: name, before: d.current, after: d.next, action: d.current === null ? 'created' : 'updated' };
      updates.push(update);
      landed.push({ update, changeId });
    }
    if (moves.length > 0) w.moveBookmarks(moves);
    // What the bookmark shows now: the pushed commit, unless it belongs to a change that a rebase moved.
    for (const { update, changeId } of landed) update.after = w.change(changeId).commit_oid;

    const touched = new Set([...rewritten.keys(), ...rebased.map((r) => r.changeId)]);
    const reconciliation: Reconciliation = {
      reconciled_commit_count: importer.imported.length,
      touched_change_count: touched.size,
      changes_created_count: created,
      evolog_inserted_count: importer.imported.length + rebased.length,
      invalid_change_id_header_count: importer.invalidHeaders,
      dirty_change_skip_count: importer.dirtySkips,
    };
    w.finish('git.push', { push_id: input.push_id, refs: applied.map((d) => d.ref), changes_created: created });
    ctx.mutation.emit('push', w.org, w.repo, { updates, reconciliation });
    return { status: 200, body: report, schema: 'gitPush' };
  },
  preparePush,
);

/** Nothing of the push applies: what its pack stored is taken back. */
function discardPush(ctx: CommandContext, repoId: string, input: PushCommandInput): void {
  for (const blob of input.staged) removeUploadSync(ctx.storage, repoId, blob.upload_id);
  if (!input.earlier_batches) return;
  const mine: string[] = [];
  for (const { oid, mark } of pendingOf(ctx.storage.meta, repoId)) if (mark.sync === input.push_id) mine.push(oid);
  if (mine.length > 0) discardFetched(ctx.storage, repoId, input.push_id, mine);
}
