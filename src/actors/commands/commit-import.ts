/**
 * Commits that arrive whole from outside — a pull from an upstream (API §9) or a git push (§14) —
 * becoming changes: the one place that decides which change a foreign commit belongs to (§5.2).
 * Every commit reachable from a tip that the repository does not know yet is taken, parents
 * first. Its change id comes from its `change-id` header, else jj's synthetic id. A header that
 * names a change the repository already has either evolves that change (a push: the target has
 * `evolve`) or, for a pull, keeps the existing change and gives the newcomer its synthetic id (a
 * "dirty" skip). A commit the importer cannot make the next commit of the named change — its
 * parents descend from that change, so the change would become its own ancestor — is taken as a
 * new change under its synthetic id and counted as an invalid header.
 *
 * Runs inside the repository actor's command, reading the change graph through its transaction;
 * the target writes the records.
 */
import { ServiceError } from '../../errors.js';
import type { ChangeRecord } from '../../storage/records.js';
import { changeIdOfCommit } from '../../vcs/commit.js';
import { CHANGE_ID_HEADER, isConflictedCommit } from '../../vcs/conflict-layout.js';
import { commitHeader, readCommit, type CommitObject } from '../../vcs/git-object.js';
import { ROOT_CHANGE_ID, newChangeId, syntheticChangeId } from '../../vcs/ids.js';
import type { RepoTransaction } from '../../vcs/transaction.js';

export interface ImportedCommit {
  oid: string;
  commit: CommitObject;
  changeId: string;
  /** Change ids of the commit's parents (`[ROOT_CHANGE_ID]` for a root commit). */
  parents: string[];
  isConflicted: boolean;
}

export interface CommitImportTarget {
  /** The commit becomes a new change. */
  create(commit: ImportedCommit): void;
  /** The commit becomes the next commit of `existing` (absent: a header naming a known change is a dirty skip). */
  evolve?(existing: ChangeRecord, commit: ImportedCommit): void;
}

export class CommitImporter {
  /** Commits imported, in the order they were taken (parents first). */
  readonly imported: ImportedCommit[] = [];
  invalidHeaders = 0;
  dirtySkips = 0;
  constructor(
    private readonly tx: RepoTransaction,
    private readonly target: CommitImportTarget,
  ) {}

  private known(oid: string): boolean {
    return this.tx.changeOfCommit(oid) !== undefined;
  }

  private parentsOf(oid: string): string[] {
    if (!this.tx.objects.has(oid)) throw new ServiceError('INTERNAL_ERROR', `the commit ${oid} a ref names is missing`);
    return readCommit(this.tx.objects, oid).parents;
  }

  importFrom(tip: string): void {
    // Iterative post-order walk: a commit is taken once all its parents are.
    const stack: Array<{ oid: string; parents: string[] | null }> = [{ oid: tip, parents: null }];
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (this.known(top.oid)) {
        stack.pop();
        continue;
      }
      if (top.parents === null) {
        top.parents = this.parentsOf(top.oid);
        for (let i = top.parents.length - 1; i >= 0; i--) {
          const parent = top.parents[i]!;
          if (!this.known(parent)) stack.push({ oid: parent, parents: null });
        }
        continue;
      }
      stack.pop();
      this.take(top.oid);
    }
  }

  private take(oid: string): void {
    const commit = readCommit(this.tx.objects, oid);
    const header = commitHeader(commit, CHANGE_ID_HEADER);
    let { changeId, fromHeader } = changeIdOfCommit(oid, commit);
    if (fromHeader && changeId === ROOT_CHANGE_ID) {
      fromHeader = false;
      changeId = syntheticChangeId(oid);
    }
    const parents = commit.parents.length === 0 ? [ROOT_CHANGE_ID] : commit.parents.map((p) => this.tx.changeOfCommit(p)!);
    const imported: ImportedCommit = { oid, commit, changeId, parents, isConflicted: isConflictedCommit(commit) };
    const existing = this.tx.findChange(changeId);
    if (existing && fromHeader && this.target.evolve) {
      if (!parents.some((p) => this.tx.isAncestor(changeId, p))) {
        this.target.evolve(existing, imported);
        this.imported.push(imported);
        return;
      }
      fromHeader = false;
    }
    if (header !== undefined && !fromHeader) this.invalidHeaders++;
    if (existing) {
      if (fromHeader) this.dirtySkips++;
      imported.changeId = syntheticChangeId(oid);
      // A synthetic id already claimed (by a commit whose header names it) gets a fresh id.
      while (this.tx.findChange(imported.changeId)) imported.changeId = newChangeId();
    }
    this.target.create(imported);
    this.imported.push(imported);
  }
}
