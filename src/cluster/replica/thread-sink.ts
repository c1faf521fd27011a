import { BroadcastChannel, threadId } from 'node:worker_threads';
import { ServiceError } from '../../errors.js';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import type { Storage } from '../../storage/database.js';
import { sealCommit } from '../../storage/replica-position.js';
import { encodeWriteSet } from '../../storage/write-set-codec.js';
import type { WriteSink } from '../../storage/write-set.js';
import { APPEND_CHANNEL, SERVING_CHANNEL, ackChannel, type AppendReply, type AppendRequest, type ServingMessage } from './replica-channels.js';

/**
 * A thread's side of replication in cluster mode: every transaction that writes shards numbers
 * its commit per shard (`seal`, inside the transaction) and, once committed, hands its write sets
 * to the main thread's replicas (`sink`), whose answer releases the replies. Also the thread's
 * copy of which shards this node serves, for actors to refuse commands of the others up front.
 * No engine client is loaded here: only the main thread talks to the log.
 */
export class ThreadReplication {
  private readonly append = new BroadcastChannel(APPEND_CHANNEL);
  private readonly acks = new BroadcastChannel(ackChannel(threadId));
  private readonly serving = new BroadcastChannel(SERVING_CHANNEL);
  private flags: Uint8Array = new Uint8Array(SHARD_COUNT);
  private readonly waiting = new Map<number, (refused: number[]) => void>();
  private next = 0;
  private storage: Storage | null = null;

  constructor() {
    this.acks.onmessage = (event) => {
      const reply = (event as { data: AppendReply }).data;
      const resolve = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      resolve?.(reply.refused);
      if (this.waiting.size === 0) this.acks.unref();
    };
    this.serving.onmessage = (event) => {
      const message = (event as { data: ServingMessage }).data;
      if (message.type === 'serving') this.flags = message.flags;
    };
    this.serving.postMessage({ type: 'hello' } satisfies ServingMessage);
    for (const channel of [this.append, this.acks, this.serving]) channel.unref();
  }

  /** The storage the seals write through (the thread's recording storage, once made). */
  attach(storage: Storage): void {
    this.storage = storage;
  }

  /** Whether this node serves `shard` now (its owner, active). */
  serves(shard: number): boolean {
    return this.flags[shard] === 1;
  }

  /** The error to answer a command of `shard` with on this node, or null when it is served here. */
  refuse(shard: number): ServiceError | null {
    if (this.serves(shard)) return null;
    return new ServiceError('UNAVAILABLE', `shard ${shard} is not served by this node right now; retry`, undefined, { retryAfter: 1 });
  }

  readonly seal = (shards: number[]): number[] => shards.map((shard) => sealCommit(this.storage!, shard));

  readonly sink: WriteSink = (writes) => {
    if (writes.shards.length === 0) return;
    const id = ++this.next;
    return this.send({
      thread: threadId,
      id,
      sets: writes.shards.map((w) => ({
        shard: w.shard,
        commit: w.commit!,
        bytes: encodeWriteSet({ ...w, epoch: 0, batchId: `${threadId}:${id}` }),
      })),
      barrier: [],
    });
  };

  /**
   * For a batch that wrote nothing: settles once the appends in flight for `shards` are in the
   * log (its commands may have read what they carry), with the shards whose appends failed.
   */
  barrier(shards: Iterable<number>): Promise<readonly number[]> {
    return this.send({ thread: threadId, id: ++this.next, sets: [], barrier: [...shards] });
  }

  /**
   * Settles once the log holds `shard`'s commits up to `commit` (the count a read snapshot
   * showed): true, or false when it never will (the shard is not served here, or its copy was
   * given up).
   */
  logged(shard: number, commit: number): Promise<boolean> {
    return this.send({ thread: threadId, id: ++this.next, sets: [], barrier: [], through: [{ shard, commit }] }).then((refused) => refused.length === 0);
  }

  private send(request: AppendRequest): Promise<readonly number[]> {
    return new Promise<readonly number[]>((resolve) => {
      if (this.waiting.size === 0) this.acks.ref();
      this.waiting.set(request.id, resolve);
      this.append.postMessage(request);
    });
  }
}
