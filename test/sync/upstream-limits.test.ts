import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { cleanupWork, createRepo, makeUpstream, passwordAuth, pullAndWait, startSyncEnv, type SyncEnv, type Upstream } from './fixtures.js';
import { answerAdvertisement, answerResult, deflatedZeros, packWithBlob, pkt, startFakeUpstream, writeRepeatedly, type FakeUpstream } from './fake-upstream.js';

const MB = 1024 * 1024;
const OID = 'c0ffee'.padEnd(40, '0');
const REFS = { HEAD: OID, 'refs/heads/main': OID };

let env: SyncEnv;
let fake: FakeUpstream;
t.before(async () => {
  env = await startSyncEnv();
  fake = await startFakeUpstream();
});
t.teardown(async () => {
  await fake.close();
  await env.close();
});

function statusField(pid: number, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

/**
 * Starts measuring the server process's memory: resets its peak RSS (Linux `clear_refs` 5) and
 * returns a function telling how far the peak has risen above the RSS at the start.
 */
function memoryProbe(pid: number): () => number {
  const start = statusField(pid, 'VmRSS');
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    // Without the reset the peak since start-up is used, which can only make the test stricter.
  }
  return () => statusField(pid, 'VmHWM') - start;
}

/** Runs `work` while `/healthz` is asked every 50 ms; every answer's status (0: none within 5 s). */
async function withHealthChecks<T>(work: Promise<T>): Promise<{ result: T; health: number[] }> {
  const health: number[] = [];
  let done = false;
  const poll = (async () => {
    while (!done) {
      health.push(await fetch(`${env.s.url}/healthz`, { signal: AbortSignal.timeout(5000) }).then((r) => r.status, () => 0));
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    return { result: await work, health };
  } finally {
    done = true;
    await poll;
  }
}

/** Pulls `name` from the fake upstream while measuring; returns the finished sync. */
async function pullMeasured(t: Test, name: string): Promise<any> {
  await createRepo(env.s, name, { url: fake.url(name) });
  const growth = memoryProbe(env.s.process.pid!);
  const { result: sync, health } = await withHealthChecks(pullAndWait(env.s, name));
  t.ok(growth() < 150 * MB, `the server's peak RSS rose ${(growth() / MB).toFixed(1)} MB`);
  t.ok(health.length > 0 && health.every((s) => s === 200), `/healthz answered throughout (${health.length} checks)`);
  t.equal(sync.attempt, 1, 'failed at once, no retry');
  return sync;
}

const refLines = (): Buffer => {
  const lines: Buffer[] = [];
  for (let i = 0; i < 1000; i++) lines.push(pkt(`${OID} refs/pull/${i}/head\n`));
  return Buffer.concat(lines);
};

t.test('upstream limits - a 400 MB ref advertisement fails the sync at the cap; memory and /healthz hold', async (t) => {
  fake.set('huge-adv', {
    discovery: (res, service) => {
      res.writeHead(200, { 'content-type': `application/x-${service}-advertisement`, 'content-length': String(400 * 1000 * 1000) });
      res.write(Buffer.concat([pkt(`# service=${service}\n`), Buffer.from('0000'), pkt(`${OID} refs/heads/main\0side-band-64k\n`)]));
      void writeRepeatedly(res, refLines(), 400 * 1000 * 1000 - 100);
    },
  });
  const sync = await pullMeasured(t, 'huge-adv');
  t.equal(sync.status, 'failed');
  t.equal(sync.error, "the upstream's ref advertisement is larger than the limit of 16777216 bytes");
});

t.test('upstream limits - an endless ref advertisement is cut off at the cap', async (t) => {
  fake.set('endless-adv', {
    discovery: (res, service) => {
      res.writeHead(200, { 'content-type': `application/x-${service}-advertisement` });
      res.write(Buffer.concat([pkt(`# service=${service}\n`), Buffer.from('0000'), pkt(`${OID} refs/heads/main\0side-band-64k\n`)]));
      void writeRepeatedly(res, refLines());
    },
  });
  const sync = await pullMeasured(t, 'endless-adv');
  t.equal(sync.status, 'failed');
  t.equal(sync.error, "the upstream's ref advertisement is larger than the limit of 16777216 bytes");
});

t.test('upstream limits - a pack entry declaring 4 GiB fails the sync clearly and allocates nothing of it', async (t) => {
  fake.set('declared-4g', {
    discovery: (res, service) => answerAdvertisement(res, service, REFS, ['ofs-delta']),
    uploadPack: (res) => answerResult(res, 'git-upload-pack', Buffer.concat([pkt('NAK\n'), packWithBlob(4 * 1024 ** 3, deflateSync('x'))])),
  });
  const sync = await pullMeasured(t, 'declared-4g');
  t.equal(sync.status, 'failed');
  t.equal(sync.error, 'the upstream sent a bad packfile: an object of 4294967296 bytes is over the limit of 536870912 bytes per object');
});

t.test('upstream limits - a pack entry inflating to 1 GiB while declaring 1 KiB fails without inflating it', async (t) => {
  const bomb = await deflatedZeros(1024 * MB);
  fake.set('bomb', {
    discovery: (res, service) => answerAdvertisement(res, service, REFS, ['ofs-delta']),
    uploadPack: (res) => answerResult(res, 'git-upload-pack', Buffer.concat([pkt('NAK\n'), packWithBlob(1024, bomb)])),
  });
  const sync = await pullMeasured(t, 'bomb');
  t.equal(sync.status, 'failed');
  t.equal(sync.error, 'the upstream sent a bad packfile: an object inflates to more than its declared size');
});

t.test('upstream limits - a large pull with large blobs and deltas of them still works', async (t) => {
  const up: Upstream = await makeUpstream(env.git, 'large');
  t.teardown(() => cleanupWork(up));
  const lines: string[] = [];
  for (let i = 0; i < 120_000; i++) lines.push(`line ${i} ${createHash('sha1').update(String(i)).digest('hex')}`);
  const push = async (text: string, message: string): Promise<void> => {
    writeFileSync(join(up.work, 'big.txt'), text);
    await env.git.gitIn(up.work, ['add', '-A']);
    await env.git.gitIn(up.work, ['commit', '--quiet', '-m', message]);
    await env.git.gitIn(up.work, ['push', '--quiet', join(env.git.root, 'large.git'), 'main']);
  };
  await push(lines.join('\n'), 'a 6 MB file');
  lines[60_000] = 'changed';
  const final = lines.join('\n');
  await push(final, 'one line changed');

  await createRepo(env.s, 'large', { url: up.url, auth: passwordAuth });
  const sync = await pullAndWait(env.s, 'large');
  t.equal(sync.status, 'completed', sync.error ?? '');
  const file = await fetch(`${env.s.url}/v1/acme/large/content?path=big.txt`, { headers: { authorization: `Bearer ${await env.s.token()}`, accept: 'application/octet-stream' } });
  t.equal(file.status, 200);
  const bytes = Buffer.from(await file.arrayBuffer());
  t.equal(bytes.length, Buffer.byteLength(final));
  t.ok(bytes.equals(Buffer.from(final)), 'the pulled file is the upstream file');
});
