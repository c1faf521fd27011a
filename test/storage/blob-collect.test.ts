import t from 'tap';
import { request } from 'node:http';
import { serverForFile, type TestServer } from '../helpers/server.js';
import { blobOid } from '../read/read-helpers.js';
import { ROOT, createRepo, noise, storedState, uploadBlob, waitUntil } from './storage-helpers.js';

/**
 * Unreferenced blobs are collected after the retention (API §5.4), here seconds instead of 24 h;
 * the org quota shows the bytes coming back.
 */
const QUOTA = 100_000;
const BLOB = 40_000;

let s: TestServer;

/** The collections the server logged for a repository, oldest first. */
function collections(repoId: string): Array<{ objects: number; uploads: number }> {
  return s.logs
    .flatMap((chunk) => chunk.split('\n'))
    .filter((line) => line.includes('"msg":"collected unreferenced blobs"') && line.includes(`"repo_id":"${repoId}"`))
    .map((line) => JSON.parse(line) as { objects: number; uploads: number });
}

t.test('blob collection - an uploaded blob no write names is collected after the retention, a referenced one stays, and the quota gets the bytes back', async (t) => {
  // Long enough for the uploads and the write that names one of them to fit in it on a slow machine.
  s = await serverForFile(t, { env: { REPOHOST_BLOB_RETENTION_S: '3', REPOHOST_ORG_QUOTA_BYTES: String(QUOTA) } });
  const orgId = (await s.api('GET', `/${s.org}`)).json.id as string;
  const repoId = await createRepo(s, 'gc');
  const kept = noise(BLOB);
  const dropped = noise(BLOB);
  const sameBytes = noise(1000);
  for (const bytes of [kept, dropped, sameBytes]) t.equal((await uploadBlob(s, 'gc', bytes)).status, 201);

  // One upload is named by blob_oid, another gets referenced by a write of the same bytes.
  const write = await s.api('POST', `/${s.org}/gc/apply-ops`, {
    body: {
      base_change_id: ROOT,
      ops: [
        { op: 'write', path: 'kept.bin', blob_oid: blobOid(kept) },
        { op: 'write', path: 'same.bin', content: sameBytes.toString('base64'), encoding: 'base64' },
      ],
    },
  });
  t.equal(write.status, 201, write.text);
  const head = write.json.change.id as string;
  const full = await uploadBlob(s, 'gc', noise(30_000));
  t.equal(full.status, 413, 'the org is nearly full: a third 30 KB upload does not fit');

  // Past the retention and a sweep the bytes come back: the refused upload fits (a refused
  // upload saves nothing, so asking again is harmless).
  await waitUntil('the unreferenced blob to be collected', async () => (await uploadBlob(s, 'gc', noise(30_000))).status === 201);
  const gone = await s.api('POST', `/${s.org}/gc/apply-ops`, { body: { change_id: head, ops: [{ op: 'write', path: 'dropped.bin', blob_oid: blobOid(dropped) }] } });
  t.equal(gone.status, 404, 'a write naming the collected blob is a 404');
  t.equal(gone.json.error.code, 'NOT_FOUND');
  t.match(gone.json.error.message, /not found in this repository/);

  // The referenced ones read back, and can still be named.
  const raw = await fetch(`${s.url}/v1/${s.org}/gc/content?path=kept.bin`, { headers: { authorization: `Bearer ${await s.token()}`, accept: 'application/octet-stream' } });
  t.equal(raw.status, 200);
  t.ok(Buffer.from(await raw.arrayBuffer()).equals(kept), 'the blob named by blob_oid reads back byte for byte');
  const again = await s.api('POST', `/${s.org}/gc/apply-ops`, { body: { change_id: head, ops: [{ op: 'write', path: 'again.bin', blob_oid: blobOid(sameBytes) }] } });
  t.equal(again.status, 200, 'the blob a write of the same bytes referenced was kept');

  // The 30 KB upload no write names is collected in its turn.
  await waitUntil('the second collection', async () => collections(repoId).length === 2);
  t.same(collections(repoId).map((c) => c.objects), [1, 1], 'each collection took the one unreferenced blob');
  await s.stop();
  const state = storedState(s.dataDir, orgId, repoId);
  t.notOk(state.objects.includes(blobOid(dropped)), 'the collected blob is gone from the objects database');
  t.ok(state.objects.includes(blobOid(kept)) && state.objects.includes(blobOid(sameBytes)));
  t.same(state.pending, [], 'nothing is left pending');
  t.ok(state.orgBytes > BLOB && state.orgBytes < BLOB + 5000, `the counter (${state.orgBytes}) counts the kept blob, its tree and commits only`);
  t.equal(state.orgBytes, state.repoBytes);
  await s.restart();
});

/**
 * Sends the start of a chunked upload (no declared length, so the quota cannot refuse it up
 * front), then a trickle of 1 KiB every 200 ms that never ends it: the server dies under it.
 * Returns once the start is sent, with a stop for the trickle.
 */
function tricklingUpload(token: string, path: string, start: Buffer): Promise<() => void> {
  return new Promise((resolve) => {
    const req = request(`${s.url}/v1${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' },
    });
    req.on('error', () => undefined);
    req.write(start, () => {
      const timer = setInterval(() => req.write(noise(1024)), 200);
      resolve(() => clearInterval(timer));
    });
  });
}

t.test('blob collection - chunks staged by an upload that never committed are collected after the retention', async (t) => {
  // Shorter than the upload's life before the kill: an upload still arriving is not an orphan.
  s = await serverForFile(t, { env: { REPOHOST_BLOB_RETENTION_S: '1' } });
  const orgId = (await s.api('GET', `/${s.org}`)).json.id as string;
  const repoId = await createRepo(s, 'orphans');
  const token = await s.token();
  // 2.5 MiB sent: two 1 MiB chunks are staged when the server is killed. The upload began
  // longer than the retention ago, but a body still arriving is not an orphan.
  const stopTrickle = await tricklingUpload(token, `/${s.org}/orphans/blobs`, noise(2.5 * 1024 * 1024));
  await new Promise((r) => setTimeout(r, 1500));
  await s.kill();
  stopTrickle();
  const crashed = storedState(s.dataDir, orgId, repoId);
  t.equal(crashed.staged.length, 1, 'the interrupted upload is announced');
  t.same(crashed.chunkUploads, crashed.staged, 'and its chunks are in the chunks database');

  await s.restart();
  await waitUntil('the orphan upload to be collected', async () => collections(repoId).some((c) => c.uploads === 1));
  await s.stop();
  const swept = storedState(s.dataDir, orgId, repoId);
  t.same(swept.staged, [], 'the announcement is gone');
  t.same(swept.chunkUploads, [], 'so are the orphan chunks');
  await s.restart();
});
