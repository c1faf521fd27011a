import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Key } from 'lmdb';
import { request, type Agent } from 'undici';
import { log } from '../../../log.js';
import { COMMIT_THEN_SYNC, type Storage } from '../../../storage/database.js';
import type { SecretBox } from '../../../storage/secret-box.js';
import { K, under } from '../../../storage/keys.js';
import { idTime, newId } from '../../../storage/ids.js';
import type { EventEnvelope } from '../../../storage/records.js';
import { AddressRefusedError, createWebhookAgent } from './outbound-agent.js';
import { getTarget, laneOf, orgTargets, type DeliveryRecord, type DeliveryStatus, type WebhookTargetRecord } from './records.js';
import { MAX_ATTEMPTS, classifyStatus, parseRetryAfter, retryDelayMs, type Verdict } from './retry-policy.js';
import { deliveryHeaders, signatureHeader } from './signature.js';

/**
 * The webhook actor (API §11.3). It runs in its own thread (`worker.ts`), never inside a
 * repository's mailbox:
 *
 *   outbox ──drain (one small transaction: events out, delivery records in)──▶ LMDB
 *   pending index ['whq', target, lane, delivery] ──▶ one head per (target, lane) in memory
 *
 * A lane (one target, one repository) sends its head delivery until it succeeds or fails for
 * good, then takes the next from the index (head of line, event order). Only lane heads live in
 * memory, so a dead receiver's backlog costs disk, not heap. Lanes of a target interleave
 * first-come first-served with at most `concurrencyPerTarget` requests in flight, and targets
 * never wait on each other: a slow or dead receiver only ever holds its own lanes. Every state
 * change is written to LMDB, so a restart resumes where the last run stopped.
 */
export interface DispatcherOptions {
  storage: Storage;
  secrets: SecretBox;
  brand: string;
  allowPrivate: boolean;
  retryBaseMs: number;
  /** How often the outbox is checked while idle. */
  pollMs: number;
  concurrencyPerTarget: number;
  /** A delivery attempt that has no answer within this is a transient failure. */
  timeoutMs: number;
  /** Finished deliveries are kept in the log this long. */
  retentionMs: number;
}

/** Events taken from the outbox per transaction: keeps the write lock short. */
const DRAIN_BATCH = 500;
/** Finished delivery records removed per transaction while pruning. */
const PRUNE_BATCH = 1000;
const PRUNE_EVERY_MS = 3600_000;
/** setTimeout's longest delay. */
const MAX_TIMER_MS = 2 ** 31 - 1;

interface Queued {
  id: string;
  orgId: string;
  targetId: string;
  lane: string;
  dueAt: number;
}

interface AttemptResult {
  verdict: Verdict;
  statusCode: number | null;
  error: string | null;
  retryAfterMs: number | null;
}

class TargetQueue {
  /** The delivery each lane is on (the first of its pending index entries). */
  readonly heads = new Map<string, Queued>();
  /** Lanes whose head is due and idle, served first come first served. */
  readonly ready: string[] = [];
  /** Lanes whose head waits for a retry time. */
  readonly waiting = new Map<string, number>();
  readonly busy = new Set<string>();
  timer: NodeJS.Timeout | null = null;
  timerAt = Infinity;
  constructor(readonly targetId: string) {}
}

export class WebhookDispatcher {
  private readonly agent: Agent;
  private readonly queues = new Map<string, TargetQueue>();
  /** Deliveries answered for good whose final state is still being written: not to be sent again. */
  private readonly finishing = new Set<string>();
  private readonly running = new Set<Promise<void>>();
  private readonly aborts = new Set<AbortController>();
  private readonly secretCache = new Map<string, { sealed: string; secret: string }>();
  private pollTimer: NodeJS.Timeout | null = null;
  private pruneTimer: NodeJS.Timeout | null = null;
  private polling: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly opts: DispatcherOptions) {
    this.agent = createWebhookAgent(opts.allowPrivate, opts.timeoutMs);
  }

  start(): void {
    this.resume();
    this.wake();
    this.pruneTimer = setTimeout(() => void this.pruneLoop(), 1000);
    this.pruneTimer.unref();
  }

  /** Checks the outbox now instead of at the next poll. */
  wake(): void {
    if (this.stopped || this.polling) return;
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = null;
    this.polling = this.poll().finally(() => {
      this.polling = null;
      if (!this.stopped) {
        this.pollTimer = setTimeout(() => this.wake(), this.opts.pollMs);
        this.pollTimer.unref();
      }
    });
  }

  /** Picks up a delivery another thread created (a redelivery) without waiting for a restart. */
  adopt(orgId: string, targetId: string, deliveryId: string): void {
    const record = this.opts.storage.meta.get(K.webhookDelivery(orgId, targetId, deliveryId)) as DeliveryRecord | undefined;
    if (record?.status === 'pending') this.offer(targetId, laneOf(record));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.pollTimer) clearTimeout(this.pollTimer);
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    for (const q of this.queues.values()) if (q.timer) clearTimeout(q.timer);
    // In-flight attempts are cut short and left pending: the next start sends them again, with
    // the same delivery id.
    for (const ac of this.aborts) ac.abort();
    await this.polling;
    await Promise.allSettled([...this.running]);
    await this.agent.destroy().catch(() => undefined);
  }

  /** Takes up every lane with pending deliveries from a previous run. */
  private resume(): void {
    let lanes = 0;
    let last = '';
    for (const key of this.opts.storage.meta.getKeys(under(['whq']))) {
      const [, targetId, lane] = key as string[];
      if (`${targetId}\0${lane}` === last) continue;
      last = `${targetId}\0${lane}`;
      lanes++;
      this.offer(targetId!, lane!);
    }
    if (lanes) log.info('webhook deliveries resumed', { lanes });
  }

  private async poll(): Promise<void> {
    try {
      // One batch per turn of the event loop, so deliveries go on during a long drain.
      while (!this.stopped && this.drainOnce()) await nextTurn();
    } catch (err) {
      log.error('webhook outbox drain failed', { err });
    }
  }

  /** Moves one batch of events from the outbox into delivery records; true when more may wait. */
  private drainOnce(): boolean {
    const { meta, root } = this.opts.storage;
    let any = false;
    for (const _ of meta.getKeys({ ...under(['outbox']), limit: 1 })) any = true;
    if (!any) return false;
    // Synchronous, so the write lock is held only while `fanOut` runs (an asynchronous transaction
    // holds it while this thread is scheduled to run the callback), and on disk when it returns:
    // a delivery is sent only once its record is durable, otherwise a crash could bring the event
    // back to the outbox and send it again under a new delivery id.
    const { created, consumed } = root.transactionSync(() => this.fanOut(), COMMIT_THEN_SYNC);
    for (const d of created) this.offer(d.targetId, d.lane);
    return consumed === DRAIN_BATCH;
  }

  /** Runs inside the drain's write transaction: every read here sees the latest commit. */
  private fanOut(): { created: Queued[]; consumed: number } {
    const { meta } = this.opts.storage;
    const entries = [...meta.getRange({ ...under(['outbox']), limit: DRAIN_BATCH })];
    const targetsByOrg = new Map<string, Subscriber[]>();
    const created: Queued[] = [];
    const now = Date.now();
    const nowIso = new Date(now).toISOString();
    for (const { key, value } of entries) {
      meta.removeSync(key);
      const event = value as EventEnvelope;
      const orgId = event.organization.id;
      let targets = targetsByOrg.get(orgId);
      if (!targets) targetsByOrg.set(orgId, (targets = [...orgTargets(meta, orgId)].map(subscriber)));
      const repoId = event.repository?.id ?? null;
      let body: string | null = null;
      for (const sub of targets) {
        if (!matches(sub, event.type, repoId)) continue;
        const target = sub.record;
        // A target hears of what happens from its creation on, not of events that were still
        // waiting in the outbox when it was created.
        if (event.occurred_at < target.created_at) continue;
        // The envelope exactly as its producer wrote it; no compiled serializer fits every `data`.
        body ??= JSON.stringify(event);
        const record: DeliveryRecord = {
          id: newId('dlv'),
          org_id: orgId,
          target_id: target.id,
          event_id: event.id,
          event_type: event.type,
          repo_id: repoId,
          body,
          status: 'pending',
          attempts: 0,
          last_status_code: null,
          last_error: null,
          next_attempt_at: nowIso,
          redelivery_of: null,
          created_at: nowIso,
        };
        const lane = laneOf(record);
        meta.putSync(K.webhookDelivery(orgId, target.id, record.id), record);
        meta.putSync(K.webhookPending(target.id, lane, record.id), orgId);
        created.push({ id: record.id, orgId, targetId: target.id, lane, dueAt: now });
      }
    }
    return { created, consumed: entries.length };
  }

  /** A lane may have work: unless it is already on a delivery, it takes its first pending one. */
  private offer(targetId: string, lane: string): void {
    if (this.stopped) return;
    let q = this.queues.get(targetId);
    if (!q) this.queues.set(targetId, (q = new TargetQueue(targetId)));
    if (q.heads.has(lane)) return;
    this.advance(q, lane);
    this.fill(q);
  }

  /** Makes the lane's first pending delivery its head (or retires the lane when there is none). */
  private advance(q: TargetQueue, lane: string): void {
    const { meta } = this.opts.storage;
    q.heads.delete(lane);
    for (const { key, value } of meta.getRange(under(['whq', q.targetId, lane]))) {
      const id = (key as string[])[3]!;
      if (this.finishing.has(id)) continue; // answered; its final state is being written
      const record = meta.get(K.webhookDelivery(value as string, q.targetId, id)) as DeliveryRecord | undefined;
      const due = record?.next_attempt_at ? Date.parse(record.next_attempt_at) : Date.now();
      const head: Queued = { id, orgId: value as string, targetId: q.targetId, lane, dueAt: due };
      q.heads.set(lane, head);
      if (head.dueAt <= Date.now()) q.ready.push(lane);
      else {
        q.waiting.set(lane, head.dueAt);
        this.armTimer(q);
      }
      break;
    }
    if (q.heads.size === 0 && q.busy.size === 0) {
      if (q.timer) clearTimeout(q.timer);
      this.queues.delete(q.targetId);
    }
  }

  private armTimer(q: TargetQueue): void {
    let next = Infinity;
    for (const at of q.waiting.values()) next = Math.min(next, at);
    if (next === q.timerAt) return;
    if (q.timer) clearTimeout(q.timer);
    q.timer = null;
    q.timerAt = next;
    if (next === Infinity || this.stopped) return;
    q.timer = setTimeout(() => {
      q.timer = null;
      q.timerAt = Infinity;
      const now = Date.now();
      for (const [lane, at] of q.waiting) {
        if (at > now) continue;
        q.waiting.delete(lane);
        q.ready.push(lane);
      }
      this.armTimer(q);
      this.fill(q);
    }, Math.min(MAX_TIMER_MS, Math.max(0, next - Date.now())));
    q.timer.unref();
  }

  private fill(q: TargetQueue): void {
    while (!this.stopped && q.busy.size < this.opts.concurrencyPerTarget && q.ready.length) {
      const lane = q.ready.shift()!;
      const head = q.heads.get(lane)!;
      q.busy.add(lane);
      const run = this.attempt(head)
        .catch((err: unknown) => {
          log.error('webhook delivery attempt failed', { err, delivery_id: head.id });
          return Date.now() + this.opts.retryBaseMs;
        })
        .then((nextAt) => this.settle(q, lane, head, nextAt));
      this.track(run);
    }
  }

  /** After an attempt: the lane moves on (nextAt null) or retries its head at `nextAt`. */
  private settle(q: TargetQueue, lane: string, head: Queued, nextAt: number | null): void {
    q.busy.delete(lane);
    if (this.stopped) return;
    if (nextAt === null) this.advance(q, lane);
    else {
      head.dueAt = nextAt;
      q.waiting.set(lane, nextAt);
      this.armTimer(q);
    }
    this.fill(q);
  }

  /** One attempt of a delivery; returns when to try it again, or null when it is done. */
  private async attempt(d: Queued): Promise<number | null> {
    const { meta, root } = this.opts.storage;
    const key = K.webhookDelivery(d.orgId, d.targetId, d.id);
    const target = getTarget(meta, d.orgId, d.targetId);
    const record = meta.get(key) as DeliveryRecord | undefined;
    if (!target || !record || record.status !== 'pending') {
      // A deleted target takes its deliveries with it; anything else left in the index is stale.
      await root.transaction(() => meta.removeSync(K.webhookPending(d.targetId, d.lane, d.id)));
      return null;
    }

    const result = await this.post(target, record);
    if (this.stopped) return null;

    const attempts = record.attempts + 1;
    let status: DeliveryStatus = 'pending';
    let nextAt: number | null = null;
    if (result.verdict === 'succeeded') status = 'succeeded';
    else if (result.verdict === 'permanent' || attempts >= MAX_ATTEMPTS) status = 'failed';
    else nextAt = Date.now() + Math.max(retryDelayMs(attempts, this.opts.retryBaseMs), result.retryAfterMs ?? 0);

    const updated: DeliveryRecord = {
      ...record,
      status,
      attempts,
      last_status_code: result.statusCode,
      last_error: result.error,
      next_attempt_at: nextAt === null ? null : new Date(nextAt).toISOString(),
    };
    const persist = root.transaction(() => {
      const current = meta.get(key) as DeliveryRecord | undefined;
      if (current?.status !== 'pending') return false;
      meta.putSync(key, updated);
      if (status !== 'pending') meta.removeSync(K.webhookPending(d.targetId, d.lane, d.id));
      return true;
    });
    if (status === 'pending') return (await persist) ? nextAt : null;
    // The lane moves on without waiting for this commit: the receiver has answered, and a crash
    // before the commit only means the same delivery id is sent once more after the restart.
    this.finishing.add(d.id);
    this.track(
      persist
        .catch((err: unknown) => log.error('webhook delivery state not saved', { err, delivery_id: d.id }))
        .finally(() => this.finishing.delete(d.id)),
    );
    return null;
  }

  private track(work: Promise<unknown>): void {
    const done = work.then(() => undefined);
    this.running.add(done);
    void done.finally(() => this.running.delete(done));
  }

  private secretOf(target: WebhookTargetRecord): string {
    const cached = this.secretCache.get(target.id);
    if (cached?.sealed === target.sealed_secret) return cached.secret;
    const secret = this.opts.secrets.open(target.sealed_secret);
    this.secretCache.set(target.id, { sealed: target.sealed_secret, secret });
    return secret;
  }

  private async post(target: WebhookTargetRecord, record: DeliveryRecord): Promise<AttemptResult> {
    let secret: string;
    try {
      secret = this.secretOf(target);
    } catch {
      return { verdict: 'permanent', statusCode: null, error: 'the target secret cannot be opened with this data directory key', retryAfterMs: null };
    }
    const signature = signatureHeader(secret, record.body, Math.floor(Date.now() / 1000));
    const headers = deliveryHeaders(this.opts.brand, record.event_type, record.id, signature);
    const ac = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort();
    }, this.opts.timeoutMs);
    this.aborts.add(ac);
    try {
      const res = await request(target.url, {
        method: 'POST',
        headers,
        body: record.body,
        dispatcher: this.agent,
        signal: ac.signal,
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
      });
      // The answer's body is not needed; reading (a bounded part of) it frees the connection.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      const verdict = classifyStatus(res.statusCode);
      return {
        verdict,
        statusCode: res.statusCode,
        error: verdict === 'succeeded' ? null : `the receiver answered HTTP ${res.statusCode}`,
        retryAfterMs: verdict === 'transient' ? parseRetryAfter(res.headers['retry-after'], Date.now()) : null,
      };
    } catch (err) {
      if (timedOut) return { verdict: 'transient', statusCode: null, error: `no answer within ${this.opts.timeoutMs / 1000} s`, retryAfterMs: null };
      const refused = findRefusal(err);
      if (refused) return { verdict: 'permanent', statusCode: null, error: `address refused: ${refused.message}`, retryAfterMs: null };
      return { verdict: 'transient', statusCode: null, error: connectionFailure(err), retryAfterMs: null };
    } finally {
      clearTimeout(timer);
      this.aborts.delete(ac);
    }
  }

  private async pruneLoop(): Promise<void> {
    try {
      await this.prune();
    } catch (err) {
      log.error('webhook delivery log pruning failed', { err });
    }
    if (this.stopped) return;
    this.pruneTimer = setTimeout(() => void this.pruneLoop(), PRUNE_EVERY_MS);
    this.pruneTimer.unref();
  }

  /** Drops finished deliveries older than the retention from every target's log. */
  async prune(): Promise<number> {
    const { meta, root } = this.opts.storage;
    const cutoff = Date.now() - this.opts.retentionMs;
    let removed = 0;
    for (const orgKey of [...meta.getKeys(under(['org']))]) {
      const orgId = (orgKey as string[])[1]!;
      for (const target of [...orgTargets(meta, orgId)]) {
        for (;;) {
          // Delivery ids sort by creation time: the old ones are a prefix of the range. Keys are
          // collected before the (async) removal, never removed while the range is iterated.
          const stale: Key[] = [];
          for (const { key, value } of meta.getRange(under(['o', orgId, 'whd', target.id]))) {
            const d = value as DeliveryRecord;
            if (idTime(d.id) >= cutoff || stale.length === PRUNE_BATCH) break;
            if (d.status !== 'pending') stale.push(key);
          }
          if (!stale.length || this.stopped) break;
          removed += await root.transaction(() => {
            let n = 0;
            for (const key of stale) {
              const current = meta.get(key) as DeliveryRecord | undefined;
              if (current && current.status !== 'pending') {
                meta.removeSync(key);
                n++;
              }
            }
            return n;
          });
          if (stale.length < PRUNE_BATCH) break;
        }
      }
    }
    return removed;
  }
}

/** A target as the fan-out matches it: sets, since a target may list thousands of repositories. */
interface Subscriber {
  record: WebhookTargetRecord;
  repos: Set<string> | null;
}

function subscriber(record: WebhookTargetRecord): Subscriber {
  return { record, repos: record.repo_ids && new Set(record.repo_ids) };
}

/** Whether an event goes to a target: a subscribed kind, and an org-wide target or one of its repositories. */
function matches(sub: Subscriber, type: string, repoId: string | null): boolean {
  if (!sub.record.events.includes(type)) return false;
  if (sub.repos === null) return true;
  return repoId !== null && sub.repos.has(repoId);
}

/**
 * `last_error` for an attempt that got no status (API §11.4): described by the error's code,
 * never by its message, which can quote the receiver's answer (a parser error's bytes).
 */
function connectionFailure(err: unknown): string {
  if ((err as Error | null)?.name === 'HTTPParserError') return "the receiver's answer is not valid HTTP";
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? `connection failed: ${code}` : 'connection failed';
}

function findRefusal(err: unknown): AddressRefusedError | null {
  for (let e = err; e; e = (e as { cause?: unknown }).cause) {
    if (e instanceof AddressRefusedError) return e;
  }
  return null;
}
