import t from 'tap';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { execFileSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { createNetLab, netnsAvailable, type NetNode } from '../helpers/netns.js';
import { startEtcd } from '../helpers/cluster-engines.js';

/** The partition tooling: nodes in namespaces reach host-side servers until cut, and again once healed. */

if (!netnsAvailable()) {
  t.plan(0, 'network namespaces need root, ip and nft');
  process.exit(0);
}

const lab = await createNetLab();
t.teardown(() => lab.teardown());

async function listen(host: string): Promise<{ server: Server; port: number }> {
  const server = createServer((_req, res) => res.end('hello'));
  server.listen(0, host);
  await once(server, 'listening');
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { server, port: (server.address() as { port: number }).port };
}

/**
 * A long-lived process inside `node`'s namespace that GETs each URL written to it and answers
 * with the body, or 'unreachable' after 1 s (one process per node: starting one per probe is slow).
 */
function prober(node: NetNode): (url: string) => Promise<string> {
  const script = "require('readline').createInterface({ input: process.stdin }).on('line', (u) => fetch(u, { signal: AbortSignal.timeout(1000) }).then((r) => r.text()).then((b) => console.log(b), () => console.log('unreachable')))";
  const child = lab.spawn(node, process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.teardown(() => void child.kill('SIGKILL'));
  const lines = createInterface({ input: child.stdout! });
  const waiting: Array<(line: string) => void> = [];
  lines.on('line', (line) => waiting.shift()?.(line.trim()));
  // One probe at a time per node, so answers come back in order.
  let chain = Promise.resolve('');
  return (url) => (chain = chain.then(() => new Promise<string>((resolve) => {
    waiting.push(resolve);
    child.stdin!.write(`${url}\n`);
  })));
}

const a = await lab.addNode('a');
const b = await lab.addNode('b');
const probes = new Map([a, b].map((n) => [n, prober(n)]));
const probe = (node: NetNode, url: string): Promise<string> => probes.get(node)!(url);
const web = await listen(lab.hostAddress);
const other = await listen(lab.hostAddress);
const hostUrl = `http://${lab.hostAddress}:${web.port}/`;
const otherUrl = `http://${lab.hostAddress}:${other.port}/`;

t.test('a node reaches the host, is cut off, and reaches it again after healing', async (t) => {
  t.equal(await probe(a, hostUrl), 'hello', 'before the cut');
  await lab.cut(a, { peer: lab.hostAddress });
  t.equal(await probe(a, hostUrl), 'unreachable', 'after the cut');
  await lab.heal(a);
  t.equal(await probe(a, hostUrl), 'hello', 'after healing');
});

t.test('a cut limited to some ports, or to one direction, leaves the rest', async (t) => {
  await lab.cut(a, { peer: lab.hostAddress, ports: [web.port] });
  t.equal(await probe(a, hostUrl), 'unreachable', 'the cut port');
  t.equal(await probe(a, otherUrl), 'hello', 'another port of the same host');
  t.equal(await probe(b, hostUrl), 'hello', 'another node is not cut');
  await lab.heal(a);
  // Only the replies are dropped: the request leaves, the connection never completes.
  await lab.cut(a, { peer: lab.hostAddress, direction: 'in' });
  t.equal(await probe(a, hostUrl), 'unreachable', 'replies dropped');
  await lab.heal(a);
  t.equal(await probe(a, hostUrl), 'hello');
});

t.test('nodes reach each other across the bridge until one cuts the other', async (t) => {
  const inA = lab.spawn(a, process.execPath, ['-e', "require('http').createServer((q, s) => s.end('from a')).listen(8080, () => console.log('up'))"], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void inA.kill('SIGKILL'));
  await once(inA.stdout!, 'data');
  const aUrl = `http://${a.address}:8080/`;
  t.equal(await probe(b, aUrl), 'from a', 'b reaches a server inside a');
  await lab.cut(b, { peer: a.address, direction: 'out' });
  t.equal(await probe(b, aUrl), 'unreachable', 'b cut from a');
  t.equal(await probe(b, hostUrl), 'hello', 'b still reaches the host');
  await lab.heal(b);
  t.equal(await probe(b, aUrl), 'from a', 'healed');
});

t.test('engines listening on the bridge address serve nodes in namespaces', async (t) => {
  const etcd = await startEtcd({ listenHost: lab.hostAddress });
  t.teardown(() => etcd.stop());
  t.ok(etcd.endpoints.every((e) => e.startsWith(`http://${lab.hostAddress}:`)), etcd.endpoints.join(' '));
  t.match(await probe(a, `${etcd.endpoints[0]}/version`), /etcdserver/, 'etcd answers a node');
  const port = Number(new URL(etcd.endpoints[0]!).port);
  await lab.cut(a, { peer: lab.hostAddress, ports: [port] });
  t.equal(await probe(a, `${etcd.endpoints[0]}/version`), 'unreachable', 'until the node is cut from that member');
  t.match(await probe(a, `${etcd.endpoints[1]}/version`), /etcdserver/, 'the other members still answer');
  await lab.heal(a);
});

t.test('teardown removes the namespaces and the bridge', async (t) => {
  const extra = await createNetLab();
  const n = await extra.addNode('x');
  t.match(execFileSync('ip', ['netns', 'list']).toString(), n.ns);
  await extra.teardown();
  t.notMatch(execFileSync('ip', ['netns', 'list']).toString(), n.ns);
  t.notMatch(execFileSync('ip', ['-4', '-o', 'addr', 'show']).toString(), extra.hostAddress + '/');
});
