import { performance } from 'node:perf_hooks';
import { EtcdLeaseInvalidError, type Etcd3, type Lease } from 'etcd3';
import type { NodeInfo } from '../placement.js';
import { deadlineIn, ETCD_CALL_DEADLINE_MS } from './etcd-client.js';
import type { ControlKeys } from './keys.js';
import type { NodeRecord } from './records.js';

/**
 * A node's membership: ONE etcd lease per node (etcd strains under many leases),
 * the node's record `nodes/<id>` bound to it, and the keepalive loop. The loop runs on timers of
 * the event loop that serves requests, so a server whose loop is stuck stops renewing and loses
 * its membership, as a dead one would.
 *
 * The self-fence: a keepalive sent at time t and confirmed by etcd keeps the lease alive until at
 * least t + TTL (etcd counts the TTL from when it received the keepalive, which is after t). The
 * node therefore may serve, reads included, only while now < t_last + TTL − margin, with t_last
 * the send time of the last confirmed keepalive; the margin absorbs clock-rate drift and the time
 * a request takes once admitted. Past t_last + TTL the lease may have expired and the controller
 * may have given the node's shards to others: the membership is then lost for good (the node
 * revokes the lease if it still can, so everyone agrees) and the process must leave the cluster.
 */

const KEEPALIVE_RETRY_MS = 100;

export type LeaseStatus = 'starting' | 'serving' | 'fenced' | 'lost' | 'closed';

export interface LeaseState {
  status: LeaseStatus;
  /** The lease id (decimal), once granted. */
  leaseId: string | null;
  ttlS: number;
  /** Milliseconds since the send time of the last confirmed keepalive, or null before the first. */
  confirmedAgoMs: number | null;
  /** Serving stops when confirmedAgoMs reaches this. */
  fenceAfterMs: number;
}

export interface MembershipOptions {
  ttlS: number;
  /** Safety margin before the TTL; default max(250 ms, TTL / 4). */
  marginMs?: number;
}

export class Membership {
  readonly ttlS: number;
  readonly fenceAfterMs: number;
  private readonly intervalMs: number;
  private lease: Lease | null = null;
  private leaseId: string | null = null;
  private status: LeaseStatus = 'starting';
  /** performance.now() when the last confirmed keepalive was sent. */
  private confirmedAt = 0;
  private tick: NodeJS.Timeout | null = null;
  private statusTimer: NodeJS.Timeout | null = null;
  private readonly listeners = new Set<(status: LeaseStatus) => void>();

  constructor(
    private readonly client: Etcd3,
    private readonly keys: ControlKeys,
    readonly info: NodeInfo,
    opts: MembershipOptions,
  ) {
    this.ttlS = opts.ttlS;
    const ttlMs = opts.ttlS * 1000;
    this.fenceAfterMs = ttlMs - (opts.marginMs ?? Math.max(250, ttlMs / 4));
    // Four keepalives per TTL leave two or three tries before the fence when one is lost.
    this.intervalMs = Math.max(100, Math.floor(ttlMs / 4));
  }

  /**
   * Registers the node under a new lease. The record is created only if absent: a node restarted
   * faster than its old lease expired waits for that (at most TTL), so the controller sees the old
   * incarnation leave and moves its shards, and two processes given the same id cannot both be
   * members. Rejects if etcd cannot be reached in time or the id stays taken.
   */
  async join(): Promise<void> {
    if (this.lease) throw new Error('membership already joined');
    const key = this.keys.node(this.info.id);
    const giveUp = performance.now() + this.ttlS * 1000 + 2000;
    for (;;) {
      if ((await this.client.get(key).string()) !== null) {
        if (performance.now() > giveUp) throw new Error(`node id ${this.info.id} is registered by another live process`);
        await new Promise((r) => setTimeout(r, 250));
        continue;
      }
      const sent = performance.now();
      const lease = this.client.lease(this.ttlS, { autoKeepAlive: false });
      lease.on('lost', () => undefined);
      const id = await lease.grant();
      const record: NodeRecord = { ...this.info, lease: id };
      const res = await this.client.if(key, 'Create', '==', 0).then(this.client.put(key).value(JSON.stringify(record)).lease(id)).commit();
      if (res.succeeded) {
        this.lease = lease;
        this.leaseId = id;
        this.confirm(sent);
        this.schedule();
        return;
      }
      // Another process took the id between the read and the transaction.
      await lease.revoke(deadlineIn(ETCD_CALL_DEADLINE_MS)).catch(() => undefined);
    }
  }

  /** Whether this node may serve now: its lease is confirmed within TTL − margin. */
  mayServe(): boolean {
    return this.status === 'serving' && performance.now() - this.confirmedAt < this.fenceAfterMs;
  }

  state(): LeaseState {
    this.refreshStatus();
    return {
      status: this.status,
      leaseId: this.leaseId,
      ttlS: this.ttlS,
      confirmedAgoMs: this.leaseId === null ? null : Math.round(performance.now() - this.confirmedAt),
      fenceAfterMs: this.fenceAfterMs,
    };
  }

  /** The granted lease id, for keys that must vanish with this node (the controller key, progress). */
  grantedLease(): string {
    if (this.leaseId === null || this.over()) throw new Error(`membership of ${this.info.id} has no live lease (${this.status})`);
    return this.leaseId;
  }

  /** Calls `listener` at each status change; returns the unsubscribe. */
  onStatus(listener: (status: LeaseStatus) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Leaves the cluster: revokes the lease, which deletes the node's record at once. */
  async leave(): Promise<void> {
    const lease = this.lease;
    this.stopTimers();
    this.setStatus('closed');
    await lease?.revoke(deadlineIn(ETCD_CALL_DEADLINE_MS)).catch(() => undefined);
  }

  private schedule(delayMs = this.intervalMs): void {
    this.tick = setTimeout(() => void this.keepalive(), delayMs);
  }

  private async keepalive(): Promise<void> {
    const lease = this.lease;
    if (!lease || this.over()) return;
    const sent = performance.now();
    let confirmed = false;
    try {
      const res = await lease.keepaliveOnce(deadlineIn(Math.min(ETCD_CALL_DEADLINE_MS, this.intervalMs)));
      confirmed = Number(res.TTL) > 0;
      if (confirmed) this.confirm(sent);
    } catch (err) {
      if (err instanceof EtcdLeaseInvalidError) return this.lose();
      // Unconfirmed: the timers fence the node if this goes on.
    }
    this.refreshStatus();
    // A keepalive stream is opened on a random member and not retried by the client: after a
    // failure (a dead member, an election) try again soon, likely on another member.
    if (!this.over()) this.schedule(confirmed ? this.intervalMs : KEEPALIVE_RETRY_MS);
  }

  /** Lost or left: the membership does not come back (a new one must be joined). */
  private over(): boolean {
    return this.status === 'lost' || this.status === 'closed';
  }

  private confirm(sent: number): void {
    if (this.over()) return;
    this.confirmedAt = Math.max(this.confirmedAt, sent);
    this.refreshStatus();
  }

  /** Sets the status from the clock and arms a timer for the next change (fence, then loss). */
  private refreshStatus(): void {
    if (this.over() || this.leaseId === null) return;
    const age = performance.now() - this.confirmedAt;
    if (age >= this.ttlS * 1000) return void this.lose();
    this.setStatus(age < this.fenceAfterMs ? 'serving' : 'fenced');
    if (this.statusTimer) clearTimeout(this.statusTimer);
    const next = age < this.fenceAfterMs ? this.fenceAfterMs - age : this.ttlS * 1000 - age;
    this.statusTimer = setTimeout(() => this.refreshStatus(), Math.ceil(next) + 1);
  }

  private lose(): void {
    const lease = this.lease;
    this.stopTimers();
    this.setStatus('lost');
    // If etcd still keeps the lease (it extends leases across a leader change), revoke it so the
    // controller moves this node's shards now rather than after a lease this node no longer renews.
    void lease?.revoke(deadlineIn(ETCD_CALL_DEADLINE_MS)).catch(() => undefined);
  }

  private stopTimers(): void {
    if (this.tick) clearTimeout(this.tick);
    if (this.statusTimer) clearTimeout(this.statusTimer);
    this.tick = this.statusTimer = null;
  }

  private setStatus(status: LeaseStatus): void {
    if (this.status === status) return;
    this.status = status;
    for (const listener of this.listeners) listener(status);
  }
}
