import { performance } from 'node:perf_hooks';
import { ServiceError, asServiceError, keyReused, storageUnavailable } from '../errors.js';
import { COMMIT_THEN_SYNC } from '../storage/commit-flags.js';
import type { Storage } from '../storage/database.js';
import { commitWrites } from '../storage/write-recorder.js';
import { threadReplication } from '../storage/server-storage.js';
import type { WriteSink } from '../storage/write-set.js';
import type { OrgDirectory } from '../storage/org-directory.js';
import type { SecretBox } from '../storage/secret-box.js';
import { loadOutcome, saveOutcome } from '../storage/idempotency-store.js';
import { receiveGrant } from '../storage/quota.js';
import { serialize } from '../protocol/serializers.js';
import { errorData, type ActorReplyMsg, type ActorRequestMsg, type QuotaGrantMsg } from '../protocol/messages.js';
import type { Command, CommandContext } from './command.js';
import { Batch } from './batch.js';
import { Mutation } from './mutation.js';
import { shardOf } from './shard-map.js';
import type { ActorSettings } from './settings.js';
import { log } from '../log.js';
import { announceOutboxEvents, takeOutboxEvents } from './system/webhooks/outbox-signal.js';
import { stallPoint } from './fault-points.js';
import { writersBusy, writersDone } from './writer-activity.js';

interface Pending {
  req: ActorRequestMsg;
  seq: number;
  arrived: number;
  resolve(reply: ActorReplyMsg): void;
}

const encoder = new TextEncoder();
const EMPTY = new Uint8Array(0);

/**
 * Thrown in place of ending the thread when `process.exit` is called while a batch transaction is
 * open (see worker.ts). A thread that died holding LMDB's write lock would leave every writer of
 * the environment, and its own shutdown, waiting forever; unwinding first rolls the batch back and
 * releases the lock, then the thread exits and the runtime answers its messages 503.
 */
export class ThreadExit extends Error {
  constructor(readonly exitCode: number) {
    super(`thread exit ${exitCode} requested during a batch`);
  }
}

/**
 * Client errors are replayed for a repeated Idempotency-Key like successes, except 429 and
 * QUOTA_EXCEEDED (transient: space can be freed) and ABORTED: a lost race is worth retrying, and a
 * key reused with another body must not overwrite the record of its first use.
 */
const replayable = (status: number, code: string): boolean => status >= 400 && status < 500 && status !== 429 && code !== 'ABORTED' && code !== 'QUOTA_EXCEEDED';

/**
 * The mailboxes of every actor this worker owns. Each actor's messages apply strictly one after
 * another, in arrival order (single writer). A drain takes everything queued across this worker's
 * actors and applies it as ONE write transaction on this thread — each command in its own nested
 * child transaction, so one failure rolls back alone — then replies once the batch is on disk.
 * Group commit turns the fsync of a transaction into a per-batch, not per-request, cost.
 *
 * The transaction is synchronous and committed with overlapping sync (`COMMIT_THEN_SYNC`): LMDB's
 * write lock is held while the commands apply and their pages are written, then released before
 * this thread waits for the disk, so another worker's batch applies during this one's sync.
 * lmdb-js's asynchronous batches were used before; each crossed to its write thread and back
 * while holding the lock, and on two busy cores those hand-offs dominated (agent-fleet at half of
 * the closed-loop maximum: p99 72–94 ms before, 35–47 ms with this design).
 */
export class Mailboxes {
  private readonly queues = new Map<string, Pending[]>();
  private scheduled = false;
  private seq = 0;
  /** True while a batch's write transaction is open on this thread. */
  inTransaction = false;

  constructor(
    private readonly storage: Storage,
    private readonly directory: OrgDirectory,
    private readonly secrets: SecretBox,
    private readonly settings: ActorSettings,
    private readonly commands: ReadonlyMap<string, Command>,
  ) {}

  deliver(req: ActorRequestMsg): Promise<ActorReplyMsg> {
    return new Promise((resolve) => {
      let queue = this.queues.get(req.actor);
      if (!queue) this.queues.set(req.actor, (queue = []));
      queue.push({ req, seq: ++this.seq, arrived: performance.now(), resolve });
      if (!this.scheduled) {
        this.scheduled = true;
        // setImmediate lets every message already posted to this thread arrive before the drain.
        setImmediate(() => this.drain());
      }
    });
  }

  private drain(): void {
    this.scheduled = false;
    if (this.queues.size === 0) return;
    const batch: Pending[] = [];
    for (const queue of this.queues.values()) for (const pending of queue) batch.push(pending);
    this.queues.clear();

    // Decoding needs no write lock, and every writer of the environment shares that one lock.
    const inputs = batch.map((p) => decodeInput(p.req, this.commands.get(p.req.command)));
    let outcomes = new Array<Outcome>(batch.length);
    const started = performance.now();
    let applied = started;
    let replicated: ReturnType<WriteSink> = undefined;
    let exit: ThreadExit | null = null;
    // Until the batch is on disk, clones' packs step aside (writer-activity.ts).
    writersBusy();
    try {
      replicated = commitWrites(
        this.storage,
        () => {
          this.inTransaction = true;
          try {
            const context = new Batch(new Date());
            for (let i = 0; i < batch.length; i++) {
              const input = inputs[i]!;
              outcomes[i] = 'error' in input ? input : this.refused(batch[i]!) ?? this.apply(batch[i]!, input, context);
            }
          } finally {
            this.inTransaction = false;
          }
          applied = performance.now();
        },
        COMMIT_THEN_SYNC,
      );
    } catch (err) {
      if (err instanceof ThreadExit) exit = err;
      else {
        // The commit itself failed (disk full, map full): nothing in the batch is durable.
        log.error('batch commit failed', { err, size: batch.length });
        outcomes = unavailableFor(batch, outcomes);
        takeOutboxEvents();
      }
    } finally {
      writersDone();
    }
    // The batch is rolled back and the write lock released: now the thread may end. Its
    // messages are answered 503 by the runtime when the thread is gone.
    if (exit) process.exit(exit.exitCode);
    // This batch's events only, announced with its replies: a later batch may commit first.
    const events = takeOutboxEvents();
    // Cluster mode: a batch that wrote nothing still waits for its shards' appends in flight.
    replicated ??= threadReplication?.barrier(new Set(batch.map((p) => shardOf(p.req.actor))));
    if (replicated) {
      // Recorded writes: the replies wait until the sink has them replicated.
      replicated.then(
        (refused) => this.reply(batch, refused ? withRefused(batch, outcomes, refused) : outcomes, started, applied, events),
        (err: unknown) => {
          log.error('batch not replicated', { err, size: batch.length });
          this.reply(batch, unavailableFor(batch, outcomes), started, applied, null);
        },
      );
    } else {
      this.reply(batch, outcomes, started, applied, events);
    }
  }

  private reply(batch: Pending[], outcomes: Outcome[], started: number, applied: number, events: number[] | null): void {
    // The webhook actor hears of the batch's events once its writes are replicated (cluster mode).
    if (events) announceOutboxEvents(events);
    const done = performance.now();
    const replies = outcomes.map((o, i) => {
      const queueMs = started - batch[i]!.arrived;
      return 'error' in o ? errorReply(o.error, queueMs) : okReply(o.status, encoder.encode(o.body), o.replayed === true, queueMs);
    });
    // Batch figures ride on the first reply only, so metrics count each batch once.
    replies[0]!.batchSize = batch.length;
    replies[0]!.commitMs = done - started;
    replies[0]!.flushMs = done - applied;
    for (let i = 0; i < batch.length; i++) {
      const written = outcomes[i]!.written;
      if (!written) batch[i]!.resolve(replies[i]!);
      // A directory write in etcd (cluster mode): the reply waits for it, and reports its failure.
      else {
        const reply = replies[i]!;
        written.then(
          (revision) => batch[i]!.resolve({ ...reply, directoryRevision: revision }),
          (err: unknown) => batch[i]!.resolve({ ...errorReply(commandError(err, batch[i]!.req), reply.queueMs), batchSize: reply.batchSize, commitMs: reply.commitMs, flushMs: reply.flushMs }),
        );
      }
    }
  }

  /** In cluster mode, a command of a shard this node does not serve now is answered 503 unrun. */
  private refused(p: Pending): { error: ServiceError } | null {
    const error = threadReplication?.refuse(shardOf(p.req.actor));
    return error ? { error } : null;
  }

  /**
   * Runs one command in a child transaction; a thrown error rolls back that command only. With an
   * Idempotency-Key, the outcome (success or client error) is recorded in the same batch, so a
   * repeat replays it instead of applying the command again. The reply is serialized inside the
   * child transaction, so a result that cannot be written rolls its command back.
   */
  private apply(p: Pending, input: Decoded, batch: Batch): Outcome {
    const outcome = this.applyCommand(p, input, batch);
    // Directory writes the command made (org directory in etcd): the reply waits for them.
    const written = this.directory.flush();
    if (!written) return outcome;
    if ('error' in outcome) {
      written.catch(() => undefined);
      return outcome;
    }
    return { ...outcome, written };
  }

  /**
   * The org allowance a refilled write carries, taken by its shard before the write runs, in a
   * transaction of its own: kept if the command fails, and a failure here costs only the grant
   * (the ledger counts it as held until its next exchange with the shard, quota.ts).
   */
  private receiveQuotaGrant(shard: number, grant: QuotaGrantMsg): void {
    try {
      this.storage.root.transactionSync(() => void receiveGrant(this.storage.meta, shard, grant.orgId, grant.granted));
    } catch (err) {
      log.warn('quota grant not received', { err, shard, org_id: grant.orgId });
    }
  }

  private applyCommand(p: Pending, input: Decoded, batch: Batch): Outcome {
    const { req } = p;
    const { now } = batch;
    const idem = req.idempotency;
    // The record lives on this actor's shard: the only one its batch may write.
    const shard = shardOf(req.actor);
    if (req.quotaGrant) this.receiveQuotaGrant(shard, req.quotaGrant);
    try {
      return this.storage.root.transactionSync((): Outcome => {
        if (idem) {
          const prior = loadOutcome(this.storage.meta, this.secrets, shard, idem.keyId, idem.key, now.getTime());
          if (prior) {
            if (prior.fingerprint !== idem.fingerprint) throw keyReused();
            return { status: prior.status, body: prior.body, replayed: true };
          }
        }
        const command = this.commands.get(req.command);
        if (!command) throw new Error(`unknown command ${req.command}`);
        const principal = req.principal!;
        const ctx: CommandContext = {
          storage: this.storage,
          directory: this.directory,
          secrets: this.secrets,
          settings: this.settings,
          principal,
          idempotency: idem ?? null,
          traceId: req.traceId,
          seq: p.seq,
          now,
          batch,
          mutation: new Mutation(this.storage, this.directory, batch, this.settings.publicUrl, principal.keyId || null, now),
        };
        const result = command.handle(input.value, ctx, input.prepared);
        stallPoint('in-transaction', req.command);
        const body = serialize(result.schema, result.body);
        if (idem && !result.partial) {
          saveOutcome(this.storage, this.secrets, shard, idem.keyId, idem.key, { fingerprint: idem.fingerprint, status: result.status, body }, now.getTime());
        }
        return { status: result.status, body };
      });
    } catch (err) {
      if (err instanceof ThreadExit) throw err;
      // Rolled back: what the batch knew of webhook targets may have been read inside it.
      batch.forgetTargets();
      const error = commandError(err, req);
      if (idem && replayable(error.status, error.code)) {
        // Outside the rolled-back child transaction, inside the batch: recorded iff the batch commits.
        const body = serialize('error', { error: errorBody(error) });
        saveOutcome(this.storage, this.secrets, shard, idem.keyId, idem.key, { fingerprint: idem.fingerprint, status: error.status, body }, now.getTime());
      }
      return { error };
    }
  }
}

/** `outcomes` with the commands of the shards whose writes were not replicated answered 503. */
function withRefused(batch: Pending[], outcomes: Outcome[], refused: readonly number[]): Outcome[] {
  if (refused.length === 0) return outcomes;
  const unavailable = storageUnavailable();
  return outcomes.map((o, i) => (refused.includes(shardOf(batch[i]!.req.actor)) ? dropped(o, unavailable) : o));
}

/** Every command of the batch answered 503 (nothing of it is durable, or replicated). */
function unavailableFor(batch: Pending[], outcomes: ReadonlyArray<Outcome | undefined>): Outcome[] {
  const unavailable = storageUnavailable();
  return batch.map((_, i) => dropped(outcomes[i], unavailable));
}

/** `error` in place of `outcome`; the directory write it waited for (if any) fails unobserved. */
function dropped(outcome: Outcome | undefined, error: ServiceError): Outcome {
  outcome?.written?.catch(() => undefined);
  return { error };
}

/**
 * What a command came to inside the batch (a serialized body, or an error); replied once the batch
 * is on disk. `replayed`: the body is an earlier request's stored outcome under the same key.
 */
type Outcome = { status: number; body: string; replayed?: boolean; written?: Promise<number> } | { error: ServiceError; written?: undefined };

/** A command's decoded input and what its `prepare` made of it. */
interface Decoded {
  value: unknown;
  prepared: unknown;
}

function decodeInput(req: ActorRequestMsg, command: Command | undefined): Decoded | { error: ServiceError } {
  try {
    const value: unknown = req.payload.length ? JSON.parse(Buffer.from(req.payload).toString('utf8')) : {};
    return { value, prepared: command?.prepare?.(value, req.blobs) };
  } catch (err) {
    return { error: commandError(err, req) };
  }
}

/** A command's failure as the client sees it: its own error, or 500 (logged) for anything else. */
function commandError(err: unknown, req: ActorRequestMsg): ServiceError {
  const known = asServiceError(err);
  if (known) return known;
  log.error('command failed', { err, command: req.command, trace_id: req.traceId });
  return new ServiceError('INTERNAL_ERROR', 'internal error');
}

function errorBody(error: ServiceError): Record<string, unknown> {
  const body: Record<string, unknown> = { code: error.code, message: error.message };
  if (error.details) body.details = error.details;
  return body;
}

function okReply(status: number, body: Uint8Array, replayed: boolean, queueMs: number): ActorReplyMsg {
  return { status, body, batchSize: 0, commitMs: 0, flushMs: 0, queueMs, replayed, directoryRevision: 0 };
}

function errorReply(e: ServiceError, queueMs: number): ActorReplyMsg {
  return {
    status: e.status,
    body: EMPTY,
    error: errorData(e),
    batchSize: 0,
    commitMs: 0,
    flushMs: 0,
    queueMs,
    replayed: false,
    directoryRevision: 0,
  };
}
