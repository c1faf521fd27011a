import type { Etcd3 } from 'etcd3';
import type { ClusterConfig } from '../../config.js';
import { Controller } from './controller.js';
import { createEtcdClient } from './etcd-client.js';
import { EtcdPlacementView } from './etcd-placement-view.js';
import { controlKeys, type ControlKeys } from './keys.js';
import { Membership } from './membership.js';
import { ProgressReporter } from './progress-reporter.js';

/**
 * A node's whole control plane, started in order: the placement view (so the node knows the
 * table before it counts as a member), the membership lease, then the controller candidate and
 * the progress reporter. The server loads this module only in cluster mode.
 */
export interface ControlPlane {
  client: Etcd3;
  keys: ControlKeys;
  membership: Membership;
  view: EtcdPlacementView;
  controller: Controller;
  progress: ProgressReporter;
  /** Leaves the cluster (resigns, revokes the lease) and closes the client. */
  close(): Promise<void>;
}

export type ControlPlaneSettings = Pick<ClusterConfig, 'name' | 'etcd' | 'nodeId' | 'nodeUrl' | 'internalUrl' | 'leaseTtlS' | 'replicas' | 'rebalanceMaxMoves' | 'rebalanceStableS'>;

export async function startControlPlane(settings: ControlPlaneSettings, opts: { roundMs?: number; progressIntervalMs?: number } = {}): Promise<ControlPlane> {
  const client = createEtcdClient({ endpoints: settings.etcd });
  const keys = controlKeys(settings.name);
  const view = new EtcdPlacementView(client, keys, settings.nodeId);
  const membership = new Membership(client, keys, { id: settings.nodeId, url: settings.nodeUrl, internalUrl: settings.internalUrl }, { ttlS: settings.leaseTtlS });
  const controller = new Controller(client, keys, membership, view, {
    replicas: settings.replicas,
    maxMoves: settings.rebalanceMaxMoves,
    stableS: settings.rebalanceStableS,
    roundMs: opts.roundMs,
  });
  const progress = new ProgressReporter(client, keys, membership, opts.progressIntervalMs);
  try {
    await view.start();
    await membership.join();
    await controller.start();
  } catch (err) {
    view.close();
    await Promise.all([controller.stop(), membership.leave()]).catch(() => undefined);
    client.close();
    throw err;
  }
  return {
    client,
    keys,
    membership,
    view,
    controller,
    progress,
    close: async () => {
      progress.close();
      await controller.stop();
      view.close();
      await membership.leave();
      client.close();
    },
  };
}
