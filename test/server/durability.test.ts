import t from 'tap';
import { startTestServer } from '../helpers/server.js';
import { checkRepositories } from '../helpers/consistency.js';

/** A 2xx means on disk (API §13): kill -9 in the middle of a burst loses no acknowledged write. */
t.test('durability - after kill -9 mid-burst every acknowledged create is there, whole, and nothing is half-written', async (t) => {
  const s = await startTestServer();
  t.teardown(() => s.cleanup());
  const token = await s.token();
  const acked: Array<{ id: string; name: string }> = [];
  let failed = 0;
  let stop = false;
  let seq = 0;
  const client = async (c: number): Promise<void> => {
    while (!stop) {
      const name = `dur-${c}-${seq++}`;
      try {
        const res = await s.api('POST', '/acme/repos', { token, body: { name, tags: { client: String(c) } } });
        if (res.status === 201) acked.push({ id: res.json.id, name: res.json.name });
        else failed++;
      } catch {
        return; // the server is gone
      }
    }
  };
  const clients = Array.from({ length: 12 }, (_, c) => client(c));
  const started = Date.now();
  while (acked.length < 300 && Date.now() - started < 20000) await new Promise((r) => setTimeout(r, 20));
  await s.kill();
  stop = true;
  await Promise.all(clients);
  t.equal(failed, 0, 'no error answers before the kill');
  t.ok(acked.length >= 100, `${acked.length} creates acknowledged before the kill (of ${seq} sent)`);

  const onDisk = await checkRepositories(t, s.dataDir, 'acme');
  const missing = acked.filter((a) => !onDisk.has(a.id));
  t.same(missing, [], 'every acknowledged create survived');
  t.ok(onDisk.size <= seq, 'nothing appeared that was never sent');

  await s.restart();
  const list = await s.api('GET', '/acme/repos/list?pageSize=1');
  t.equal(list.json.total, onDisk.size, 'the restarted server sees the same repositories');
  for (const a of acked.slice(-25)) {
    const res = await s.api('GET', `/acme/${a.name}`);
    t.equal(res.status, 200);
    t.equal(res.json.id, a.id);
  }
  const again = await s.api('POST', '/acme/repos', { body: { name: acked[0]!.name.toUpperCase() } });
  t.equal(again.status, 409, 'the name index survived with the records');
  t.equal((await s.api('POST', '/acme/repos', { body: { name: 'after-restart' } })).status, 201);
  t.equal(await s.stop(), 0);
});
