import { ServiceError } from '../../errors.js';
import type { ReadFence, ReadTicket } from '../../http/read-fence.js';
import type { Storage } from '../../storage/database.js';
import { commitCount } from '../../storage/replica-position.js';
import type { NodeReplicas } from './node-replicas.js';

const notAcknowledged = (shard: number): ServiceError =>
  new ServiceError('UNAVAILABLE', `shard ${shard} holds writes here that its log did not acknowledge; retry`, { reason: 'not_acknowledged', shard }, { retryAfter: 1 });

/**
 * The cluster's ReadFence (src/http/read-fence.ts). Every transaction that writes a shard raises
 * the shard's commit count inside it, whichever thread commits, so a read snapshot's count bounds
 * every commit the snapshot shows; the shard's replica knows the highest commit number its log
 * acknowledged in the current activation. A read is answered at once when the count in the
 * snapshot it read is not above that number, and otherwise once the appends up to it are
 * acknowledged; it gets a 503 when the activation it read ends with its copy given up (an append
 * refused or never confirmed), or when the commits are not acknowledged within the lease TTL.
 *
 * The count rather than the record cache's calls in flight (record-cache.ts): those know neither
 * the system actors' writes nor what another thread (the read pool) read meanwhile; the count
 * covers both, for one LMDB get per shard read. It is per shard: a read may wait for appends of
 * other repositories of its shard too (the record in flight and the next, usually).
 */
export class AcknowledgedReads implements ReadFence {
  constructor(
    private readonly storage: Storage,
    private readonly replicas: NodeReplicas,
  ) {}

  open(): ReadTicket {
    return new Ticket(this, this.replicas);
  }

  made(shards: Iterable<number>): Promise<void> | null {
    let waits: Array<Promise<void>> | null = null;
    for (const shard of new Set(shards)) {
      const wait = this.settled(shard, this.replicas.activation(shard));
      if (wait) (waits ??= []).push(wait);
    }
    return all(waits);
  }

  /** Starts a read snapshot at least as new as any read a request made on another thread or turn. */
  renewSnapshot(): void {
    this.storage.root.resetReadTxn();
  }

  /**
   * Null when the log holds every commit of `shard` the current snapshot shows, in `activation`;
   * else a promise that settles once it does, or rejects with a 503 when it will not.
   */
  settled(shard: number, activation: number): Promise<void> | null {
    const acknowledged = this.replicas.acknowledged(shard, activation, commitCount(this.storage, shard));
    if (acknowledged === true) return null;
    if (acknowledged === false) return Promise.reject(notAcknowledged(shard));
    return acknowledged.then((ok) => {
      if (!ok) throw notAcknowledged(shard);
    });
  }
}

/** One request's shards read here, with the activation each was served in when it was noted. */
class Ticket implements ReadTicket {
  private readonly shards: number[] = [];
  private readonly activations: number[] = [];

  constructor(
    private readonly fence: AcknowledgedReads,
    private readonly replicas: NodeReplicas,
  ) {}

  read(shard: number): void {
    if (this.shards.includes(shard)) return;
    const activation = this.replicas.activation(shard);
    if (activation === 0) return;
    this.shards.push(shard);
    this.activations.push(activation);
  }

  answer<T>(outcome: () => T | Promise<T>, replies: boolean): T | Promise<T> {
    let result: T | Promise<T>;
    try {
      result = outcome();
    } catch (err) {
      // Thrown in this step: the snapshot it read is the current one.
      return this.thrown(err, false);
    }
    if (result instanceof Promise) {
      return result.then(
        (value) => (replies ? this.after(value, true) : value),
        (err: unknown) => this.thrown(err, true),
      );
    }
    return replies ? this.after(result, false) : result;
  }

  private after<T>(value: T, later: boolean): T | Promise<T> {
    const wait = this.pending(later);
    return wait ? wait.then(() => value) : value;
  }

  private thrown(err: unknown, later: boolean): never | Promise<never> {
    const wait = this.pending(later);
    if (!wait) throw err;
    return wait.then(() => {
      throw err;
    });
  }

  /**
   * What the answer waits for. `later`: it was made after this step (a worker's read, a body, a
   * peer), possibly in a snapshot newer than the thread's current one, which is renewed first.
   */
  private pending(later: boolean): Promise<void> | null {
    if (this.shards.length === 0) return null;
    if (later) this.fence.renewSnapshot();
    let waits: Array<Promise<void>> | null = null;
    for (let i = 0; i < this.shards.length; i++) {
      const wait = this.fence.settled(this.shards[i]!, this.activations[i]!);
      if (wait) (waits ??= []).push(wait);
    }
    return all(waits);
  }
}

function all(waits: Array<Promise<void>> | null): Promise<void> | null {
  if (waits === null) return null;
  return waits.length === 1 ? waits[0]! : Promise.all(waits).then(() => undefined);
}
