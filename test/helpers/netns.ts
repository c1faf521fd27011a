import { execFile, execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

/**
 * Network namespaces for partition tests (root only). A lab is a Linux bridge on the host with an
 * address in a private /24; each node is a namespace joined to the bridge by a veth pair, with
 * its own address in that /24. Engines started with `listenHost: lab.hostAddress` are reachable
 * from every node. Cuts are nftables drop rules inside a node's namespace, so one node's view can
 * be cut in one direction only, towards the host (engines, by port) or towards another node.
 * Deleting a namespace deletes its veth and its rules; `teardown` removes everything the lab
 * made, and a new lab first removes what labs of dead processes left behind.
 */

const run = promisify(execFile);

/** Names carry the creating process's id, so leftovers of a killed run can be told apart. */
const NS_PREFIX = 'rhlab-';

export interface NetNode {
  name: string;
  /** The namespace (`ip netns exec <ns> …`). */
  ns: string;
  address: string;
}

export interface Cut {
  /** The other end: an address (the host's bridge address, or another node's). */
  peer: string;
  /** Only these TCP ports of the peer (e.g. one engine's client ports); all traffic when omitted. */
  ports?: number[];
  /** 'out': the node's packets to the peer are dropped; 'in': the peer's packets to the node; 'both'. */
  direction?: 'out' | 'in' | 'both';
}

export interface NetLab {
  /** The host's address on the bridge: engines listen here. */
  hostAddress: string;
  /** `/24` of the lab, e.g. `10.231.7.0/24`. */
  subnet: string;
  nodes: NetNode[];
  addNode(name: string): Promise<NetNode>;
  /** Spawns `command` inside the node's namespace (the child's pid is the command's: `ip netns exec` execs it). */
  spawn(node: NetNode, command: string, args: string[], opts?: SpawnOptions): ChildProcess;
  cut(node: NetNode, cut: Cut): Promise<void>;
  /** Removes every cut of the node. */
  heal(node: NetNode): Promise<void>;
  teardown(): Promise<void>;
}

/** True when this process may create namespaces with nft rules in them (tried once, then removed). */
export function netnsAvailable(): boolean {
  if (process.getuid?.() !== 0) return false;
  const probe = `${NS_PREFIX}${process.pid}-probe`;
  try {
    execFileSync('ip', ['netns', 'add', probe], { stdio: 'ignore' });
    execFileSync('ip', ['netns', 'exec', probe, 'nft', 'add', 'table', 'inet', 'rhpart'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  } finally {
    quietSync('ip', ['netns', 'del', probe]);
  }
}

export async function createNetLab(): Promise<NetLab> {
  await removeLeftovers();
  const tag = randomBytes(3).toString('hex');
  const bridge = `rhb${tag}`;
  const octet = await freeSubnetOctet();
  const subnet = `10.231.${octet}.0/24`;
  const hostAddress = `10.231.${octet}.1`;
  const nodes: NetNode[] = [];
  const nsName = (i: number): string => `${NS_PREFIX}${process.pid}-${tag}-${i}`;

  const torn = { done: false };
  const teardownSync = (): void => {
    if (torn.done) return;
    torn.done = true;
    for (const n of nodes) quietSync('ip', ['netns', 'del', n.ns]);
    quietSync('ip', ['link', 'del', bridge]);
  };
  // Even when the test process ends without its teardown (an uncaught error), nothing stays.
  process.once('exit', teardownSync);

  await run('ip', ['link', 'add', bridge, 'type', 'bridge']);
  await run('ip', ['addr', 'add', `${hostAddress}/24`, 'dev', bridge]);
  await run('ip', ['link', 'set', bridge, 'up']);

  const nft = (node: NetNode, ...args: string[]): Promise<unknown> => run('ip', ['netns', 'exec', node.ns, 'nft', ...args]);

  const lab: NetLab = {
    hostAddress,
    subnet,
    nodes,
    async addNode(name) {
      const i = nodes.length;
      const node: NetNode = { name, ns: nsName(i), address: `10.231.${octet}.${i + 2}` };
      const hostSide = `rh${tag}h${i}`;
      const nodeSide = `rh${tag}n${i}`;
      await run('ip', ['netns', 'add', node.ns]);
      nodes.push(node);
      await run('ip', ['link', 'add', hostSide, 'type', 'veth', 'peer', 'name', nodeSide]);
      await run('ip', ['link', 'set', nodeSide, 'netns', node.ns]);
      await run('ip', ['link', 'set', hostSide, 'master', bridge]);
      await run('ip', ['link', 'set', hostSide, 'up']);
      await run('ip', ['-n', node.ns, 'addr', 'add', `${node.address}/24`, 'dev', nodeSide]);
      await run('ip', ['-n', node.ns, 'link', 'set', nodeSide, 'up']);
      await run('ip', ['-n', node.ns, 'link', 'set', 'lo', 'up']);
      // One table per namespace with an input and an output chain; cuts are rules in them.
      await nft(node, 'add', 'table', 'inet', 'rhpart');
      await nft(node, 'add', 'chain', 'inet', 'rhpart', 'in', '{ type filter hook input priority 0; }');
      await nft(node, 'add', 'chain', 'inet', 'rhpart', 'out', '{ type filter hook output priority 0; }');
      return node;
    },
    spawn(node, command, args, opts = {}) {
      return spawn('ip', ['netns', 'exec', node.ns, command, ...args], opts);
    },
    async cut(node, c) {
      const direction = c.direction ?? 'both';
      const ports = c.ports && c.ports.length > 0 ? `{ ${c.ports.join(', ')} }` : null;
      if (direction !== 'in') await nft(node, 'add', 'rule', 'inet', 'rhpart', 'out', 'ip', 'daddr', c.peer, ...(ports ? ['tcp', 'dport', ports] : []), 'drop');
      if (direction !== 'out') await nft(node, 'add', 'rule', 'inet', 'rhpart', 'in', 'ip', 'saddr', c.peer, ...(ports ? ['tcp', 'sport', ports] : []), 'drop');
    },
    async heal(node) {
      await nft(node, 'flush', 'chain', 'inet', 'rhpart', 'out');
      await nft(node, 'flush', 'chain', 'inet', 'rhpart', 'in');
    },
    async teardown() {
      teardownSync();
      process.off('exit', teardownSync);
    },
  };
  return lab;
}

function quietSync(cmd: string, args: string[]): void {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
  } catch {
    // already gone
  }
}

/** A third octet for 10.231.x.0/24 that no interface of this host uses yet. */
async function freeSubnetOctet(): Promise<number> {
  const { stdout } = await run('ip', ['-4', '-o', 'addr', 'show']);
  for (;;) {
    const octet = 1 + Math.floor(Math.random() * 254);
    if (!stdout.includes(`10.231.${octet}.`)) return octet;
  }
}

/** Deletes namespaces (and their bridges) left by lab processes that no longer run. */
async function removeLeftovers(): Promise<void> {
  const { stdout } = await run('ip', ['netns', 'list']);
  for (const line of stdout.split('\n')) {
    const m = new RegExp(`^(${NS_PREFIX}(\\d+)-([0-9a-f]{6})-\\d+)`).exec(line);
    if (!m || isAlive(Number(m[2]))) continue;
    quietSync('ip', ['netns', 'del', m[1]!]);
    quietSync('ip', ['link', 'del', `rhb${m[3]}`]);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
