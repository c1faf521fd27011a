/**
 * The analytics actor: notices default-bookmark moves and keeps each repository's document up to
 * date, off the request path and outside every repository's mailbox.
 *
 * Noticing costs the write path nothing: every mutation already rewrites the repository record
 * (`last_op_id`), and is a call to the repository's actor. Each turn looks at the repositories
 * whose calls settled since the last (`touched`) and closer only at those whose operation (or
 * default bookmark) changed. A scan of every repository record runs at the start and then rarely,
 * for what no call announced (a shard taken over from another node, records copied in while
 * stopped): reading every record each turn cost an eighth of a core idle at 10,000 repositories
 * and would grow with their number. Bursts coalesce: one
 * computation per repository at a time, queued once however often it moved, and the computation
 * reads the head when it starts — the latest head wins. A failed run is retried with backoff, and
 * at once when the repository moves again.
 */
import { log } from '../../../log.js';
import type { Storage } from '../../../storage/database.js';
import type { RepoRecord } from '../../../storage/records.js';
import { allRepoIds, getRepo } from '../../../storage/repo-store.js';
import type { RunOutcome } from './engine.js';

/** What the actor drives (the engine; an injected one in tests). */
export interface AnalyticsRunner {
  needsRun(repoId: string): boolean;
  run(repoId: string): Promise<RunOutcome>;
  /** Ends a run in progress early (shutdown). */
  cancel?(): void;
}

export interface AnalyticsActorOptions {
  /** Time between turns (touched repositories and due retries). */
  intervalMs?: number;
  /** Least time between scans of every repository record; a scan taking t waits at least 200 t. */
  fullScanMs?: number;
  /** First retry delay after a failed run; doubles up to `retryMaxMs`. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  onOutcome?: (repoId: string, outcome: RunOutcome) => void;
  /**
   * Cluster mode: whether this node owns the repository's shard now. Only the owner computes: a
   * follower's write would be a commit outside the shard's log, and its copy would be dropped as
   * divergent. The owner's documents reach the followers through the log.
   */
  serves?: (repoId: string) => boolean;
}

export class AnalyticsActor {
  /** repoId → what the repository record said at the last scan. */
  readonly #seen = new Map<string, string>();
  readonly #queue: string[] = [];
  readonly #queued = new Set<string>();
  readonly #retry = new Map<string, { at: number; delayMs: number }>();
  #touched = new Set<string>();
  #nextFullScan = 0;
  readonly #intervalMs: number;
  readonly #fullScanMs: number;
  readonly #retryBaseMs: number;
  readonly #retryMaxMs: number;
  #timer: NodeJS.Timeout | null = null;
  #draining: Promise<void> | null = null;
  #stopped = false;

  constructor(
    private readonly storage: Storage,
    private readonly runner: AnalyticsRunner,
    private readonly options: AnalyticsActorOptions = {},
  ) {
    this.#intervalMs = options.intervalMs ?? 500;
    this.#fullScanMs = options.fullScanMs ?? 60_000;
    this.#retryBaseMs = options.retryBaseMs ?? 30_000;
    this.#retryMaxMs = options.retryMaxMs ?? 600_000;
  }

  start(): void {
    const tick = (): void => {
      if (this.#stopped) return;
      try {
        this.turn();
      } catch (err) {
        log.error('analytics scan failed', { error: (err as Error).message });
      }
      this.#timer = setTimeout(tick, this.#intervalMs);
    };
    tick();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.runner.cancel?.();
    await this.#draining;
  }

  /** Repositories whose actors settled calls: looked at on the next turn. */
  touched(repoIds: Iterable<string>): void {
    for (const repoId of repoIds) this.#touched.add(repoId);
  }

  /** Asks for a scan of every repository record on the next turn. */
  scanAllNext(): void {
    this.#nextFullScan = 0;
  }

  /**
   * One turn: a scan of every record when one is due, else the touched repositories and the
   * retries that are due. Returns how many were queued.
   */
  turn(now = Date.now()): number {
    if (now >= this.#nextFullScan) {
      const started = performance.now();
      const queued = this.scan(now);
      this.#nextFullScan = now + Math.max(this.#fullScanMs, (performance.now() - started) * 200);
      return queued;
    }
    const candidates = this.#touched;
    this.#touched = new Set();
    for (const [repoId, retry] of this.#retry) if (retry.at <= now) candidates.add(repoId);
    let queued = 0;
    for (const repoId of candidates) {
      const repo = getRepo(this.storage.meta, repoId);
      if (!repo) {
        this.#forget(repoId);
        continue;
      }
      if (this.#check(repoId, repo, now)) queued++;
    }
    if (queued > 0) this.#drain();
    return queued;
  }

  /** Queues every repository whose document is behind; returns how many were queued. */
  scan(now = Date.now()): number {
    const meta = this.storage.meta;
    const alive = new Set<string>();
    this.#touched = new Set();
    let queued = 0;
    for (const repoId of allRepoIds(meta)) {
      alive.add(repoId);
      const repo = getRepo(meta, repoId);
      if (repo && this.#check(repoId, repo, now)) queued++;
    }
    for (const repoId of this.#seen.keys()) if (!alive.has(repoId)) this.#forget(repoId);
    if (queued > 0) this.#drain();
    return queued;
  }

  /** Queues a repository whose record changed since it was last seen (or whose retry is due). */
  #check(repoId: string, repo: RepoRecord, now: number): boolean {
    // Not marked seen: a shard taken over later is looked at by the next full scan.
    if (this.options.serves?.(repoId) === false) return false;
    const mark = `${repo.last_op_id ?? ''}|${repo.default_bookmark}`;
    const retry = this.#retry.get(repoId);
    const due = retry !== undefined && retry.at <= now;
    if (this.#seen.get(repoId) === mark && !due) return false;
    this.#seen.set(repoId, mark);
    if (due) this.#retry.delete(repoId);
    return this.#enqueueIfBehind(repoId);
  }

  #forget(repoId: string): void {
    this.#seen.delete(repoId);
    this.#retry.delete(repoId);
  }

  /** Resolves once nothing is queued or running (tests, benchmarks). */
  async idle(): Promise<void> {
    while (this.#draining) await this.#draining;
  }

  #enqueueIfBehind(repoId: string): boolean {
    if (this.#queued.has(repoId) || !this.runner.needsRun(repoId)) return false;
    this.#queued.add(repoId);
    this.#queue.push(repoId);
    return true;
  }

  #drain(): void {
    if (this.#draining) return;
    this.#draining = (async () => {
      while (!this.#stopped && this.#queue.length > 0) {
        const repoId = this.#queue.shift()!;
        if (this.options.serves?.(repoId) === false) {
          // The shard moved away while this waited: its new owner computes.
          this.#queued.delete(repoId);
          this.#seen.delete(repoId);
          continue;
        }
        // Still queued while running: a move seen meanwhile is picked up by the re-check below.
        const outcome = await this.runner.run(repoId);
        this.#queued.delete(repoId);
        this.options.onOutcome?.(repoId, outcome);
        if (outcome.kind === 'cancelled') break;
        if (outcome.kind === 'failed') {
          const previous = this.#retry.get(repoId)?.delayMs;
          const delayMs = previous === undefined ? this.#retryBaseMs : Math.min(previous * 2, this.#retryMaxMs);
          this.#retry.set(repoId, { at: Date.now() + delayMs, delayMs });
          log.warn('analytics run failed', { repo_id: repoId, error: outcome.error, retry_in_ms: delayMs });
        } else {
          this.#retry.delete(repoId);
          if (outcome.kind !== 'unchanged' && outcome.kind !== 'gone') {
            log.debug('analytics computed', { repo_id: repoId, kind: outcome.kind, computed: outcome.computed, reused: outcome.reused, ms: Math.round(outcome.ms) });
          }
          // The head may have moved while this run computed an older one.
          this.#enqueueIfBehind(repoId);
        }
      }
    })().finally(() => {
      this.#draining = null;
    });
  }
}
