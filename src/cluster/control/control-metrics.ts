import { Counter, Gauge, type Registry } from 'prom-client';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import type { Controller } from './controller.js';
import type { EtcdPlacementView } from './etcd-placement-view.js';
import type { LeaseStatus, Membership } from './membership.js';
import type { WriteReason } from './planner.js';

/**
 * The control plane's Prometheus metrics, read at scrape time: the node's lease state and the age
 * of its last confirmed keepalive, whether it is the controller, the shards it owns and follows,
 * and the placement writes its controller made, by reason (promotions, moves, …).
 */
const STATUSES: LeaseStatus[] = ['starting', 'serving', 'fenced', 'lost', 'closed'];

export function registerControlPlaneMetrics(registry: Registry, plane: { membership: Membership; controller: Controller; view: EtcdPlacementView }): void {
  const registers = [registry];
  const { membership, controller, view } = plane;
  new Gauge({
    name: 'repohost_cluster_lease_state',
    help: "1 for the node's current lease status (serving, fenced: serves nothing, lost: must leave)",
    labelNames: ['status'],
    registers,
    collect() {
      const now = membership.state().status;
      for (const s of STATUSES) this.set({ status: s }, s === now ? 1 : 0);
    },
  });
  new Gauge({
    name: 'repohost_cluster_lease_confirmed_age_seconds',
    help: 'Time since the send time of the last keepalive etcd confirmed',
    registers,
    collect() {
      const age = membership.state().confirmedAgoMs;
      if (age !== null) this.set(age / 1000);
    },
  });
  new Gauge({
    name: 'repohost_cluster_controller',
    help: '1 while this node is the elected controller',
    registers,
    collect() {
      this.set(controller.isLeader() ? 1 : 0);
    },
  });
  new Gauge({
    name: 'repohost_cluster_shards',
    help: 'Shards this node owns or follows, by the placement table',
    labelNames: ['role'],
    registers,
    collect() {
      let owner = 0;
      let follower = 0;
      for (let s = 0; s < SHARD_COUNT; s++) {
        const p = view.shard(s);
        if (p?.owner === view.localNodeId) owner++;
        else if (p?.followers.includes(view.localNodeId)) follower++;
      }
      this.set({ role: 'owner' }, owner);
      this.set({ role: 'follower' }, follower);
    },
  });
  new Counter({
    name: 'repohost_cluster_placement_writes_total',
    help: "Placement entries this node's controller wrote, by reason (promote = failover, move-flip = a graceful move)",
    labelNames: ['reason'],
    registers,
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(controller.writes) as Array<[WriteReason, number]>) this.inc({ reason }, n);
    },
  });
}
