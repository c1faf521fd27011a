/**
 * How fast, and at what CPU cost, the webhook actor delivers a backlog: the outbox is filled
 * while the server is down (as after an outage), then the server starts and delivers every event
 * to every target on the bench's receiver process.
 *
 *   node dist/bench/webhook-backlog.js [--events 2000] [--targets 10] [--repos 200] [--workers 2]
 *
 * Method: a real server on a temporary data directory; R repositories and T targets, each
 * subscribed to `change.created` on all R (as in the `webhooks` scenario); one apply-ops gives a
 * real `change.created` envelope, copied N times into the outbox (repositories round-robin,
 * fresh event ids) with the server stopped. From the server's "listening" line to the last
 * arrival: deliveries per second, and the CPU time the server process and the receiver spent
 * (all their threads, from /proc), per delivery. The server is otherwise idle, so its CPU is the
 * webhook actor's; what it spends idle (measured for 5 s afterwards) is also reported taken off,
 * and so is what its workers spend starting after that line (measured on one more start with
 * nothing to deliver). The CPU figures move less than the rate on a shared machine.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { ApiClient, mapLimit } from './api-client.js';
import { ReceiverProcess } from './receiver-process.js';
import { createOrgAndKey, startRepohost } from './server-process.js';
import { createSigner } from './tokens.js';
import { openStorage } from '../src/storage/database.js';
import { Ranges } from '../src/storage/keys.js';
import { putOutboxEvent } from '../src/storage/outbox.js';
import { newId } from '../src/storage/ids.js';
import type { EventEnvelope } from '../src/storage/records.js';

const ROOT = 'z'.repeat(32);
const FILL_BATCH = 500;
const IDLE_MS = 5000;
/** A start is over once a second of it costs no more than idle (plus this), or after STARTUP_MAX_MS. */
const STARTUP_SLACK_MS = 10;
const STARTUP_MAX_MS = 30_000;

/** CPU milliseconds a process has used, all threads (utime + stime). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { events: { type: 'string' }, targets: { type: 'string' }, repos: { type: 'string' }, workers: { type: 'string' } } });
  const events = Number(values.events ?? 2000);
  const targets = Number(values.targets ?? 10);
  const repos = Number(values.repos ?? 200);
  const workers = Number(values.workers ?? 2);
  const dir = await mkdtemp(join(os.tmpdir(), 'repohost-webhook-backlog-'));
  const dataDir = join(dir, 'data');
  const receiver = await ReceiverProcess.start(targets);
  try {
    const key = await createOrgAndKey(dataDir, 'bench');
    let server = await startRepohost({ dataDir, workers, logFile: join(dir, 'server-setup.log') });
    const api = new ApiClient(server.url, 'bench', await (await createSigner(key))());
    const repoIds = await mapLimit(Array.from({ length: repos }, (_, i) => `r-${i}`), 16, async (name) => (await api.expect<{ id: string }>(201, 'POST', '/v1/bench/repos', { name })).id);
    for (let i = 0; i < targets; i++) {
      await api.expect(201, 'POST', '/v1/bench/webhook-targets', { name: `t-${i}`, url: `http://127.0.0.1:${receiver.port}/t/${i}`, events: ['change.created'], repo_ids: repoIds });
    }
    await api.expect(201, 'POST', '/v1/bench/r-0/apply-ops', {
      base_change_id: ROOT,
      ops: [0, 1, 2].map((f) => ({ op: 'write', path: `agent/file-${f}.txt`, content: 'x'.repeat(2048), encoding: 'utf-8' })),
      bookmarks: [{ name: 'main' }],
    });
    while ((await receiver.snapshot(false)).received < targets) await sleep(50);
    await api.close();
    await server.stop();

    const storage = openStorage(dataDir);
    const sample = [...storage.meta.getRange(Ranges.allShards())].find((e) => (e.value as { event_type?: string }).event_type === 'change.created');
    if (!sample) throw new Error('no change.created delivery to copy');
    const template = JSON.parse((sample.value as { body: string }).body) as EventEnvelope;
    for (let done = 0; done < events; done += FILL_BATCH) {
      storage.root.transactionSync(() => {
        for (let i = done; i < Math.min(events, done + FILL_BATCH); i++) {
          const repoId = repoIds[i % repos]!;
          const event: EventEnvelope = { ...template, id: newId('evt'), occurred_at: new Date().toISOString(), repository: { ...template.repository!, id: repoId, name: `r-${i % repos}` } };
          putOutboxEvent(storage.meta, event);
        }
      });
    }
    await storage.close();

    const before = (await receiver.snapshot(false)).received;
    const expected = before + events * targets;
    server = await startRepohost({ dataDir, workers, logFile: join(dir, 'server.log') });
    const startedAt = Date.now();
    const serverCpu0 = cpuMs(server.pid);
    const receiverCpu0 = cpuMs(receiver.pid);
    let snap = await receiver.snapshot(false);
    while (snap.received < expected && Date.now() - startedAt < 600_000) {
      await sleep(100);
      snap = await receiver.snapshot(false);
    }
    const serverCpu = cpuMs(server.pid) - serverCpu0;
    const receiverCpu = cpuMs(receiver.pid) - receiverCpu0;
    // What the server spends idle (timers, its other threads), taken off its figure: at a low
    // delivery rate it would otherwise weigh on every delivery.
    const idle0 = cpuMs(server.pid);
    await sleep(IDLE_MS);
    const idleCpuPerSec = ((cpuMs(server.pid) - idle0) * 1000) / IDLE_MS;
    await server.stop();
    // The window above opens at the front end's "listening" line, while the workers (the webhook
    // thread's own included) are still starting: 2.6-3.1 s of CPU on a loaded machine, 130-150 us
    // a delivery at 20,000 deliveries.
    server = await startRepohost({ dataDir, workers, logFile: join(dir, 'server-startup.log') });
    const startup0 = cpuMs(server.pid);
    let startupMs = 0;
    for (let last = startup0, now = last; startupMs < STARTUP_MAX_MS; last = now) {
      await sleep(1000);
      startupMs += 1000;
      now = cpuMs(server.pid);
      if (now - last <= idleCpuPerSec + STARTUP_SLACK_MS) break;
    }
    const startupCpu = cpuMs(server.pid) - startup0 - (idleCpuPerSec * startupMs) / 1000;
    await server.stop();
    const delivered = snap.received - before;
    const seconds = ((snap.lastAt ?? Date.now()) - startedAt) / 1000;
    const result = {
      events,
      targets,
      repos,
      workers,
      delivered,
      duplicates: snap.duplicates,
      seconds: Number(seconds.toFixed(2)),
      deliveriesPerSec: Math.round(delivered / seconds),
      serverCpuUsPerDelivery: Math.round((serverCpu * 1000) / delivered),
      serverIdleCpuMsPerSec: Math.round(idleCpuPerSec),
      serverCpuUsPerDeliveryLessIdle: Math.round(((serverCpu - idleCpuPerSec * seconds) * 1000) / delivered),
      serverStartupCpuMs: Math.round(startupCpu),
      serverCpuUsPerDeliveryLessIdleAndStartup: Math.round(((serverCpu - idleCpuPerSec * seconds - startupCpu) * 1000) / delivered),
      receiverCpuUsPerDelivery: Math.round((receiverCpu * 1000) / delivered),
      loadAverage: os.loadavg().map((l) => Number(l.toFixed(1))),
      node: process.version,
      at: new Date().toISOString(),
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
    if (delivered < events * targets) process.exitCode = 1;
  } finally {
    receiver.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
