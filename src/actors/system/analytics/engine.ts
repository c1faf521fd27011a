/**
 * Computes and stores one repository's analytics document (API §10).
 *
 * Beside the document, every counted commit keeps its own result under
 * `['r', repo, 'analytics-commit', oid]`, and the state record names the head the document counts.
 * Invariant (while `rebuilding` is false): the kept results are exactly the commits reachable from
 * that head. So an update walks back from the new head and stops at kept commits:
 * - when the old head is among the commits it stopped at, the new head descends from it and the
 *   walked commits are exactly the new ones: they are added to the stored totals (incremental;
 *   more than one write chunk of them is handled as a rebuild, which reuses everything kept);
 * - otherwise history was rewritten (or notes or the agent table changed): the document is
 *   rebuilt from every reachable commit, reusing kept results whose inputs are unchanged (a
 *   result depends only on the commit, its first parent, its note and the agent table), then
 *   results of commits no longer reachable are dropped.
 *
 * A rebuild writes results in several transactions (so as not to hold the write lock for long) and
 * sets `rebuilding` first; a run interrupted in between leaves it set and the next run rebuilds.
 * The engine writes only its own records, in its own transactions, never inside an actor's turn.
 */
import { performance } from 'node:perf_hooks';
import { log } from '../../../log.js';
import { TimeSlice } from '../../../time-slice.js';
import { COMMIT_THEN_SYNC } from '../../../storage/commit-flags.js';
import type { Storage } from '../../../storage/database.js';
import {
  getAnalyticsState,
  getKeptCommit,
  hasAnalyticsText,
  hasKeptCommit,
  keptCommitOids,
  putAnalyticsState,
  putAnalyticsText,
  putKeptCommit,
  removeKeptCommit,
  type AnalyticsState,
} from '../../../storage/analytics-store.js';
import { repoExists } from '../../../storage/repo-store.js';
import type { ObjectStore } from '../../../vcs/object-store.js';
import type { AgentTable } from './agent-table.js';
import { AgentblameNotes } from './agentblame-notes.js';
import { computeCommit } from './commit-stats.js';
import type { CommitResult } from './commit-stats.js';
import { addCommits, emptyDocument } from './document.js';
import type { AnalyticsDocument, HistoryItem } from './document.js';
import type { AnalyticsSource } from './source.js';
import { encodeDocument, readDocument } from './stored-document.js';

/** Bumped when per-commit results would come out differently: kept results are then recomputed. */
export const ENGINE_VERSION = 1;

/** A kept per-commit result. */
interface KeptCommit {
  parents: string[];
  merge: boolean;
  /** The note blob the result was computed with. */
  note: string | null;
  item: HistoryItem;
}

export type RunKind = 'unchanged' | 'incremental' | 'rebuild' | 'gone' | 'failed' | 'cancelled';

export interface RunOutcome {
  kind: RunKind;
  head: string | null;
  /** Commits diffed in this run. */
  computed: number;
  /** Commits whose kept result was reused. */
  reused: number;
  ms: number;
  error?: string;
}

export interface EngineOptions {
  now?: () => Date;
  /** Continuous work before yielding to the event loop (lets a worker see `stop`, and LMDB renew its read snapshot). */
  sliceMs?: number;
  /** Results written per transaction during a rebuild. */
  writeChunk?: number;
}

interface Walk {
  /** The walked commits, children before parents. */
  order: CommitResult[];
  /** Commits the walk stopped at. */
  boundary: Set<string>;
  computed: number;
  reused: number;
}

/** Thrown at a yield point once `cancel()` was called; the run leaves what it had not written. */
class RunCancelled extends Error {}

const keptOf = (r: CommitResult, note: string | null): KeptCommit => ({ parents: r.parents, merge: r.merge, note, item: r.item });

export class AnalyticsEngine {
  readonly #now: () => Date;
  readonly #sliceMs: number;
  readonly #writeChunk: number;
  #cancelled = false;

  constructor(
    private readonly storage: Storage,
    private readonly source: AnalyticsSource,
    private readonly table: AgentTable,
    options: EngineOptions = {},
  ) {
    this.#now = options.now ?? (() => new Date());
    this.#sliceMs = options.sliceMs ?? 20;
    this.#writeChunk = options.writeChunk ?? 1000;
  }

  /** Brings the repository's document up to its current head; never throws (a failure is recorded in `_meta`). */
  async run(repoId: string): Promise<RunOutcome> {
    const started = performance.now();
    const attempt = this.#now().toISOString();
    try {
      const outcome = await this.#run(repoId, attempt);
      return { ...outcome, ms: performance.now() - started };
    } catch (err) {
      // Shutting down: nothing failed, the next start picks the work up again.
      if (err instanceof RunCancelled) return { kind: 'cancelled', head: null, computed: 0, reused: 0, ms: performance.now() - started };
      const error = err instanceof Error ? err.message : String(err);
      try {
        this.#recordFailure(repoId, attempt, error);
      } catch (recordErr) {
        log.error('analytics failure could not be recorded', { repo_id: repoId, error: (recordErr as Error).message });
      }
      return { kind: 'failed', head: null, computed: 0, reused: 0, ms: performance.now() - started, error };
    }
  }

  /**
   * Stops a run in progress at its next yield (a long rebuild must not hold up a shutdown). An
   * interrupted rebuild left `rebuilding` set, so it is redone, reusing what it had kept.
   */
  cancel(): void {
    this.#cancelled = true;
  }

  /** True when the document does not count the current head and inputs (a run would change it). */
  needsRun(repoId: string): boolean {
    const meta = this.storage.meta;
    if (!this.source.exists(repoId)) return false;
    const state = getAnalyticsState(meta, repoId);
    const head = this.source.head(repoId);
    // An empty repository has nothing to count: it stays "none" until its first commit.
    if (state === undefined) return head !== null || hasAnalyticsText(meta, repoId);
    if (
      state.rebuilding ||
      state.engine !== ENGINE_VERSION ||
      state.table !== this.table.fingerprint ||
      state.head !== head ||
      state.notes !== this.source.notes(repoId)
    ) {
      return true;
    }
    // Up to date but the last attempt failed (e.g. its write): a run clears the error.
    return state.error !== '';
  }

  async #run(repoId: string, attempt: string): Promise<Omit<RunOutcome, 'ms'>> {
    const meta = this.storage.meta;
    if (!this.source.exists(repoId)) return { kind: 'gone', head: null, computed: 0, reused: 0 };
    const state = getAnalyticsState(meta, repoId);
    const stored = readDocument(meta, repoId);
    const head = this.source.head(repoId);
    const notesOid = this.source.notes(repoId);
    const keptValid = state !== undefined && state.engine === ENGINE_VERSION && state.table === this.table.fingerprint;
    const consistent = keptValid && !state.rebuilding && stored !== undefined && state.notes === notesOid;

    if (consistent && state.head === head) {
      this.#stamp(stored, attempt, false);
      this.#write(repoId, () => {
        putAnalyticsText(meta, repoId, encodeDocument(stored));
        putAnalyticsState(meta, repoId, { ...state, error: '' });
      });
      return { kind: 'unchanged', head, computed: 0, reused: 0 };
    }

    const store = this.source.objects(repoId);
    const notes = AgentblameNotes.read(store, notesOid, (oid) => this.source.predecessor(repoId, oid));
    const fresh = new Map<string, CommitResult>();
    if (consistent && state.head !== null && head !== null) {
      const walk = await this.#walk(store, head, notes, fresh, (oid) => hasKeptCommit(meta, repoId, oid), () => undefined);
      // A long run of new commits (a large pull) goes the rebuild way, whose writes are chunked.
      if (walk.boundary.has(state.head) && walk.order.length <= this.#writeChunk) {
        addCommits(stored, walk.order.filter((r) => !r.merge).map((r) => r.item));
        this.#stamp(stored, attempt, true);
        const next: AnalyticsState = { ...state, head, error: '' };
        this.#write(repoId, () => {
          for (const r of walk.order) putKeptCommit(meta, repoId, r.oid, keptOf(r, notes.blobOf(r.oid)));
          putAnalyticsText(meta, repoId, encodeDocument(stored));
          putAnalyticsState(meta, repoId, next);
        });
        return { kind: 'incremental', head, computed: walk.computed, reused: 0 };
      }
    }
    return this.#rebuild(repoId, attempt, store, head, notesOid, notes, fresh, state, keptValid);
  }

  async #rebuild(
    repoId: string,
    attempt: string,
    store: ObjectStore,
    head: string | null,
    notesOid: string | null,
    notes: AgentblameNotes,
    fresh: Map<string, CommitResult>,
    state: AnalyticsState | undefined,
    keptValid: boolean,
  ): Promise<Omit<RunOutcome, 'ms'>> {
    const meta = this.storage.meta;
    if (state && !state.rebuilding) this.#write(repoId, () => putAnalyticsState(meta, repoId, { ...state, rebuilding: true }));
    const pending: CommitResult[] = [];
    const flush = (): void => {
      const batch = pending.splice(0);
      this.#write(repoId, () => {
        for (const r of batch) putKeptCommit(meta, repoId, r.oid, keptOf(r, notes.blobOf(r.oid)));
      });
    };
    const kept = (oid: string): CommitResult | undefined => {
      if (!keptValid) return undefined;
      const k = getKeptCommit<KeptCommit>(meta, repoId, oid);
      if (!k || k.note !== notes.blobOf(oid)) return undefined;
      return { oid, parents: k.parents, merge: k.merge, item: k.item };
    };
    const walk = head === null
      ? { order: [], boundary: new Set<string>(), computed: 0, reused: 0 }
      : await this.#walk(store, head, notes, fresh, () => false, kept, (r) => {
          pending.push(r);
          if (pending.length >= this.#writeChunk) flush();
        });

    const doc = emptyDocument();
    addCommits(doc, walk.order.filter((r) => !r.merge).map((r) => r.item));
    this.#stamp(doc, attempt, true);
    const reachable = new Set(walk.order.map((r) => r.oid));
    const stale: string[] = [];
    for (const oid of keptCommitOids(meta, repoId)) if (!reachable.has(oid)) stale.push(oid);
    const next: AnalyticsState = { engine: ENGINE_VERSION, table: this.table.fingerprint, head, notes: notesOid, rebuilding: false, error: '' };
    const last = pending.splice(0);
    this.#write(repoId, () => {
      for (const r of last) putKeptCommit(meta, repoId, r.oid, keptOf(r, notes.blobOf(r.oid)));
      for (const oid of stale) removeKeptCommit(meta, repoId, oid);
      putAnalyticsText(meta, repoId, encodeDocument(doc));
      putAnalyticsState(meta, repoId, next);
    });
    return { kind: 'rebuild', head, computed: walk.computed, reused: walk.reused };
  }

  /**
   * Walks back from `head` over commits that are not `known`, resolving each (a result of this
   * run, a kept one, or computed now) and returns them in topological order, children first.
   */
  async #walk(
    store: ObjectStore,
    head: string,
    notes: AgentblameNotes,
    fresh: Map<string, CommitResult>,
    known: (oid: string) => boolean,
    kept: (oid: string) => CommitResult | undefined,
    onComputed?: (r: CommitResult) => void,
  ): Promise<Walk> {
    const nodes = new Map<string, CommitResult>();
    const boundary = new Set<string>();
    const stack = [head];
    let computed = 0;
    let reused = 0;
    const slice = new TimeSlice(this.#sliceMs);
    while (stack.length > 0) {
      const oid = stack.pop()!;
      if (nodes.has(oid) || boundary.has(oid)) continue;
      if (known(oid)) {
        boundary.add(oid);
        continue;
      }
      // Results computed earlier in this run (an incremental attempt that found a rewrite) are
      // new to storage too.
      let result = fresh.get(oid);
      if (!result) {
        result = kept(oid);
        if (result) reused++;
      }
      if (!result) {
        result = computeCommit(store, oid, this.table, notes.rangesOf(oid));
        fresh.set(oid, result);
      }
      if (fresh.has(oid)) {
        computed++;
        onComputed?.(result);
      }
      nodes.set(oid, result);
      for (const parent of result.parents) stack.push(parent);
      if (slice.over) {
        await slice.yield();
        if (this.#cancelled) throw new RunCancelled('cancelled');
      }
    }
    return { order: topologicalOrder(head, nodes), boundary, computed, reused };
  }

  #stamp(doc: AnalyticsDocument, attempt: string, counted: boolean): void {
    const done = this.#now().toISOString();
    doc._meta = { lastAttempt: attempt, lastSuccess: done, lastError: '' };
    if (counted || doc.summary.updated === '') doc.summary.updated = done;
  }

  #recordFailure(repoId: string, attempt: string, error: string): void {
    const meta = this.storage.meta;
    const doc = readDocument(meta, repoId) ?? emptyDocument();
    doc._meta = { lastAttempt: attempt, lastSuccess: doc._meta.lastSuccess, lastError: error };
    this.#write(repoId, () => {
      putAnalyticsText(meta, repoId, encodeDocument(doc));
      // Without a state there is no computation to mark: the document alone says it failed.
      const state = getAnalyticsState(meta, repoId);
      if (state) putAnalyticsState(meta, repoId, { ...state, error });
    });
  }

  /**
   * Writes in one transaction of this thread's own, only while the repository exists: checked
   * inside the transaction, so a repository deleted during a run gets no records back. A
   * synchronous transaction: an asynchronous one would hold LMDB's write lock while this
   * low-priority thread waits to be scheduled to run `fn`, stalling the actors' writes.
   */
  #write(repoId: string, fn: () => void): void {
    const meta = this.storage.meta;
    meta.transactionSync(() => {
      if (repoExists(meta, repoId)) fn();
    }, COMMIT_THEN_SYNC);
  }
}

/** Kahn's order over the walked commits (edges to commits outside the walk are ignored). */
function topologicalOrder(head: string, nodes: ReadonlyMap<string, CommitResult>): CommitResult[] {
  const pendingChildren = new Map<string, number>();
  for (const r of nodes.values()) {
    for (const parent of new Set(r.parents)) if (nodes.has(parent)) pendingChildren.set(parent, (pendingChildren.get(parent) ?? 0) + 1);
  }
  const order: CommitResult[] = [];
  const ready = nodes.has(head) ? [head] : [];
  while (ready.length > 0) {
    const r = nodes.get(ready.pop()!)!;
    order.push(r);
    // Reversed so the first parent is taken next: a linear history comes out newest first.
    for (const parent of [...new Set(r.parents)].reverse()) {
      if (!nodes.has(parent)) continue;
      const left = pendingChildren.get(parent)! - 1;
      pendingChildren.set(parent, left);
      if (left === 0) ready.push(parent);
    }
  }
  return order;
}
