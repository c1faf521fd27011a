import { ServiceError } from '../../errors.js';
import type { Storage } from '../../storage/database.js';
import type { ShardLog } from '../shard-log.js';
import type { BatchReplication } from '../../actors/batch-replication.js';
import { ShardReplica, type ReplicaContext } from './shard-replica.js';
import type { ReplicaControl, ReplicaControlReply } from './replica-control.js';

export interface WorkerReplicaOptions {
  storage: Storage;
  log: ShardLog;
  nodeId: string;
  applyWriteSet: (storage: Storage, writeSet: Uint8Array) => void;
  unknownDeadlineMs: number;
}

const notServed = (shard: number): ServiceError =>
  new ServiceError('UNAVAILABLE', `shard ${shard} is not served by this node right now; retry`, undefined, { retryAfter: 1 });

const appendFailed = (): ServiceError =>
  new ServiceError('UNAVAILABLE', 'the write could not be replicated; it may not have been applied, retry', undefined, { retryAfter: 1 });

/**
 * The replicas of the shards one actor worker owns (cluster mode): the mailbox asks it whether a
 * shard's commands may run, hands it each batch's write sets and holds replies until the log
 * acknowledged them; the front end assigns roles and reads state changes through control messages.
 */
export class WorkerReplicas implements BatchReplication {
  private readonly replicas = new Map<number, ShardReplica>();
  private readonly changedShards = new Set<number>();
  private notify: (() => void) | null = null;
  private readonly ctx: ReplicaContext;

  constructor(private readonly options: WorkerReplicaOptions) {
    this.ctx = {
      storage: options.storage,
      log: options.log,
      nodeId: options.nodeId,
      applyWriteSet: options.applyWriteSet,
      unknownDeadlineMs: options.unknownDeadlineMs,
      changed: (replica) => {
        this.changedShards.add(replica.shard);
        const notify = this.notify;
        this.notify = null;
        notify?.();
      },
    };
  }

  refuse(shard: number): ServiceError | null {
    return this.replicas.get(shard)?.serving ? null : notServed(shard);
  }

  sealing(shards: Iterable<number>): void {
    for (const shard of shards) this.replicas.get(shard)!.beforeCommit();
  }

  committed(writeSets: ReadonlyMap<number, Uint8Array>): void {
    // Failures reach the replies through settled().
    for (const [shard, ws] of writeSets) this.replicas.get(shard)!.committed(ws).catch(() => undefined);
  }

  settled(shard: number): Promise<ServiceError | null> {
    const replica = this.replicas.get(shard);
    if (!replica) return Promise.resolve(null);
    return replica.settled().then(
      () => null,
      () => appendFailed(),
    );
  }

  async control(message: ReplicaControl): Promise<ReplicaControlReply> {
    if (message.type === 'assign') {
      for (const a of message.assignments) {
        let replica = this.replicas.get(a.shard);
        if (!replica) this.replicas.set(a.shard, (replica = new ShardReplica(a.shard, this.ctx)));
        replica.assign(a.role, a.epoch);
      }
      this.changedShards.clear();
      return [...this.replicas.values()].map((r) => r.report());
    }
    if (this.changedShards.size === 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, message.waitMs);
        this.notify = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    const shards = [...this.changedShards];
    this.changedShards.clear();
    return shards.map((s) => this.replicas.get(s)!.report());
  }

  async close(): Promise<void> {
    await Promise.all([...this.replicas.values()].map((r) => r.close()));
    await this.options.log.close();
  }
}
