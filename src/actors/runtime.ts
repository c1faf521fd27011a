import { Piscina } from 'piscina';
import type { PiscinaTask } from 'piscina';
import { fileURLToPath } from 'node:url';
import { ServiceError } from '../errors.js';
import { decodeReply, encodeRequest, errorFromData, type ActorReplyMsg, type IdempotencyMsg, type PrincipalMsg, type QuotaGrantMsg } from '../protocol/messages.js';
import { shardOf, slotOf } from './shard-map.js';
import type { ActorSettings } from './settings.js';
import type { ActorCaller } from './actor-caller.js';
import { releaseWriterSlot, writeAnswered, writeDispatched, writerActivityBuffer } from './writer-activity.js';

export interface ActorCall {
  actor: string;
  command: string;
  input: unknown;
  principal: PrincipalMsg;
  traceId: string;
  idempotency?: IdempotencyMsg;
  /** ActorRequest.blobs: objects the input's ops name by index (none for most commands). */
  blobs?: Uint8Array[];
  /** ActorRequest.quota_grant: allowance for the command's shard, received before it runs. */
  quotaGrant?: QuotaGrantMsg;
}

export interface ActorResponse {
  status: number;
  /** The serialized JSON body. */
  body: Uint8Array;
  /** The stored outcome of an earlier request under the same Idempotency-Key (ActorReply.replayed). */
  replayed: boolean;
  /** ActorReply.directory_revision: 0, or the org directory's revision the caller's view awaits. */
  directoryRevision: number;
}

/** What a caller gets from an actor's reply: the response, or the actor's failure thrown. */
export function responseOf(reply: ActorReplyMsg): ActorResponse {
  if (reply.error) throw errorFromData(reply.error);
  return { status: reply.status, body: reply.body, replayed: reply.replayed, directoryRevision: reply.directoryRevision };
}

/** A call as the ActorRequest bytes a worker thread (or, forwarded, another node) reads. */
export function encodeCall(call: ActorCall): Uint8Array {
  return encodeRequest({
    actor: call.actor,
    command: call.command,
    payload: Buffer.from(JSON.stringify(call.input ?? {})),
    principal: call.principal,
    traceId: call.traceId,
    idempotency: call.idempotency,
    blobs: call.blobs ?? [],
    quotaGrant: call.quotaGrant,
  });
}

export interface BatchObserver {
  (stats: { command: string; batchSize: number; commitMs: number; flushMs: number; queueMs: number }): void;
}

export interface RuntimeOptions {
  workers: number;
  settings: ActorSettings;
  mailboxLimit: number;
  /** Module (file URL or path) exporting `commands: Command[]`. */
  commandsModule: string;
  onBatch?: BatchObserver;
  /**
   * Called on the calling thread when a call to `actor` is dispatched: from then until it settles,
   * the actor may commit at any moment (a commit is visible before its flush ends and it replies).
   */
  onDispatched?: (actor: string) => void;
  /**
   * Called on the calling thread when a call to `actor` has settled (replied, failed, or lost with
   * its worker), before the caller sees the outcome. The server renews its LMDB read snapshot
   * and drops its cached records of that actor here: a read that follows an acknowledged write
   * must see it, and a snapshot taken earlier in the same event-loop turn would not.
   */
  onSettled?: (actor: string) => void;
}

type PiscinaWorker = Parameters<NonNullable<ConstructorParameters<typeof Piscina>[0]>['loadBalancer'] & {}>[1][number];

const queueOptions = Piscina.queueOptionsSymbol;

/**
 * The front end's handle on the actors. `call` addresses an actor by key; the runtime finds its
 * shard, the worker slot that owns the shard and posts a protobuf message there. Piscina hosts
 * the threads; a custom load balancer keeps affinity through a stable slot table (a replacement
 * worker takes the dead one's slot, so no other shard moves). Mailbox depth is counted here so
 * that a full mailbox is refused (429) before any work is queued.
 */
export class ActorRuntime implements ActorCaller {
  private readonly pool: Piscina;
  private readonly slots: Array<number | null>;
  private readonly depth = new Map<string, number>();
  private readonly slotDepth: number[];
  private closing: Promise<void> | null = null;

  constructor(private readonly options: RuntimeOptions) {
    this.slots = new Array<number | null>(options.workers).fill(null);
    this.slotDepth = new Array<number>(options.workers).fill(0);
    this.pool = new Piscina({
      filename: fileURLToPath(new URL('./worker.js', import.meta.url)),
      minThreads: options.workers,
      maxThreads: options.workers,
      idleTimeout: Infinity,
      concurrentTasksPerWorker: 1 << 20,
      maxQueue: Infinity,
      atomics: 'disabled',
      stricterFIFO: true,
      workerData: { settings: options.settings, commandsModule: options.commandsModule, writerActivity: writerActivityBuffer() },
      loadBalancer: (task, workers) => this.pick(task, workers),
    });
    // A worker that dies fails its in-flight tasks (answered 503 below); Piscina replaces it.
    this.pool.on('error', () => undefined);
    // A batch it left under way must not keep clones waiting (writer-activity.ts).
    this.pool.on('workerDestroy', (worker: PiscinaWorker) => releaseWriterSlot(worker.id));
  }

  get workerCount(): number {
    return this.options.workers;
  }

  /** Messages queued or running per worker slot. */
  mailboxDepths(): readonly number[] {
    return this.slotDepth;
  }

  private pick(task: PiscinaTask, workers: PiscinaWorker[]): PiscinaWorker | null {
    const slot = (task[queueOptions as keyof PiscinaTask] as unknown as { slot: number }).slot;
    const owner = this.slots[slot];
    const live = (w: PiscinaWorker): boolean => !w.destroyed && !w.terminating;
    if (owner !== null) {
      const w = workers.find((x) => x.id === owner && live(x));
      if (w) return w;
    }
    const taken = new Set(this.slots.filter((id, i) => id !== null && i !== slot && workers.some((w) => w.id === id && live(w))));
    const free = workers.find((w) => live(w) && !taken.has(w.id));
    if (!free) return null;
    this.slots[slot] = free.id;
    return free;
  }

  async call(call: ActorCall): Promise<ActorResponse> {
    const { reply } = await this.dispatch(call.actor, call.command, encodeCall(call));
    return responseOf(reply);
  }

  /**
   * Runs an encoded ActorRequest for `actor` and resolves to its ActorReply, decoded and as the
   * worker's bytes (a message forwarded by another node goes back as it came: cluster/forward/).
   * Refusals before the worker (full mailbox, shutdown, a lost worker) are thrown.
   */
  async dispatch(actor: string, command: string, bytes: Uint8Array): Promise<{ reply: ActorReplyMsg; raw: Uint8Array }> {
    if (this.closing) throw new ServiceError('UNAVAILABLE', 'server is shutting down', undefined, { retryAfter: 1 });
    const depth = this.depth.get(actor) ?? 0;
    if (depth >= this.options.mailboxLimit) {
      throw new ServiceError('RATE_LIMITED', 'too many requests queued for this repository, retry later', undefined, { retryAfter: 1 });
    }
    const slot = slotOf(shardOf(actor), this.options.workers);
    this.depth.set(actor, depth + 1);
    this.slotDepth[slot]!++;
    this.options.onDispatched?.(actor);
    writeDispatched();
    try {
      let raw: Uint8Array;
      try {
        raw = (await this.pool.run({ bytes, [queueOptions]: { slot } })) as Uint8Array;
      } catch {
        // The worker died with this message in its mailbox (Piscina fails its tasks and starts a
        // replacement that takes over the slot); the message may or may not have been applied.
        throw new ServiceError('UNAVAILABLE', 'the worker serving this repository restarted; retry', undefined, { retryAfter: 1 });
      }
      const reply = decodeReply(raw);
      this.options.onBatch?.({ command, batchSize: reply.batchSize, commitMs: reply.commitMs, flushMs: reply.flushMs, queueMs: reply.queueMs });
      return { reply, raw };
    } finally {
      writeAnswered();
      this.options.onSettled?.(actor);
      const d = this.depth.get(actor)! - 1;
      if (d === 0) this.depth.delete(actor);
      else this.depth.set(actor, d);
      this.slotDepth[slot]!--;
    }
  }

  /** Stops taking messages, lets queued ones finish (they reply after their flush), ends threads. */
  close(): Promise<void> {
    this.closing ??= this.pool.close();
    return this.closing;
  }
}
