import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { serverForFile } from '../helpers/server.js';
import { HistoryRecorder, type ApiCall } from '../helpers/history-recorder.js';
import { checkRegisterHistory, describeVerdict } from '../helpers/linearizability.js';
import { createRegisters, missingChanges, REGISTER_BOOKMARK, ROOT_CHANGE, runRegisterWorkload } from '../helpers/register-workload.js';

/** The recorder and the register workload against one real server: what the fault scenarios run on a cluster. */

const s = await serverForFile(t);
const api: ApiCall = (method, path, opts) => s.api(method, path, opts);

for (const name of ['one', 'two']) {
  const res = await s.api('POST', `/${s.org}/repos`, { body: { name } });
  if (res.status !== 201) throw new Error(`create ${name}: ${res.status} ${res.text}`);
}

t.test('replies are classified as the checker needs them', async (t) => {
  const r = new HistoryRecorder();
  t.match(await r.read(api, s.org, 'one', 'absent', 'c'), { outcome: 'ok', status: 404, value: null }, 'a missing bookmark reads null');
  t.match(await r.create(api, s.org, 'one', 'b', ROOT_CHANGE, 'c'), { outcome: 'ok', status: 201 });
  t.match(await r.create(api, s.org, 'one', 'b', ROOT_CHANGE, 'c'), { outcome: 'fail', status: 409, code: 'BRANCH_EXISTS' }, 'creating it again is refused');
  const other = await s.api('POST', `/${s.org}/one/apply-ops`, { body: { base_change_id: ROOT_CHANGE, message: 'other', ops: [{ op: 'write', path: 'x', content: 'x' }] } });
  t.match(await r.cas(api, s.org, 'one', 'b', other.json.change.id, ROOT_CHANGE, 'c'), { outcome: 'fail', status: 409, code: 'ABORTED' }, 'a guard that does not hold is refused');
  t.match(await r.read(api, s.org, 'one', 'b', 'c'), { outcome: 'ok', value: ROOT_CHANGE });
  const nowhere: ApiCall = () => fetch('http://127.0.0.1:1/v1/x').then(() => {
    throw new Error('unreachable');
  });
  t.match(await r.move(nowhere, s.org, 'one', 'b', ROOT_CHANGE, 'c'), { outcome: 'info', status: null }, 'no connection: unknown');
  const slow: ApiCall = async (_m, _p, o) => {
    await sleep(10_000, undefined, { signal: o?.signal });
    throw new Error('not reached');
  };
  t.match(await new HistoryRecorder(50).move(slow, s.org, 'one', 'b', ROOT_CHANGE, 'c'), { outcome: 'info', code: 'timeout' }, 'no reply in time: unknown');
  const unavailable: ApiCall = async () => ({ status: 503, headers: new Headers(), json: { error: { code: 'UNAVAILABLE' } }, text: '' });
  t.match(await r.move(unavailable, s.org, 'one', 'b', ROOT_CHANGE, 'c'), { outcome: 'info', status: 503 }, 'a 5xx: unknown');
  t.same(
    r.ops.map((h) => [h.op.f, h.outcome]),
    [['read', 'ok'], ['cas', 'ok'], ['cas', 'fail'], ['cas', 'fail'], ['read', 'ok'], ['write', 'info'], ['write', 'info']],
    'each call recorded once, in order',
  );
  t.same([...new Set(r.ops.map((h) => h.key))], [`${s.org}/one/absent`, `${s.org}/one/b`], 'one register per bookmark');
  t.ok(r.ops.every((h) => h.completedAt >= h.invokedAt));
});

t.test('a concurrent register workload on a real server is linearizable, and a tampered copy is not', async (t) => {
  const recorder = new HistoryRecorder();
  await createRegisters(recorder, api, s.org, ['one', 'two']);
  const stats = await runRegisterWorkload({ org: s.org, repos: ['one', 'two'], apis: [api], recorder, clients: 6, until: sleep(3000), pauseMs: 1 });
  const writes = recorder.acknowledgedWrites();
  t.ok(writes.some((h) => h.key === `${s.org}/one/${REGISTER_BOOKMARK}`), 'the first key was written');
  t.ok(writes.length > 20, `${stats.operations} operations, ${writes.length} acknowledged writes`);
  t.ok(recorder.ops.some((h) => h.op.f === 'read' && h.outcome === 'ok' && h.op.value !== ROOT_CHANGE), 'reads saw moves');
  const verdict = checkRegisterHistory(recorder.ops);
  t.ok(verdict.linearizable, describeVerdict(verdict) || `${verdict.keys.map((k) => `${k.key}: ${k.operations} ops`).join(', ')}`);
  t.same(await missingChanges(api, s.org, stats.changes), [], `all ${stats.changes.length} acknowledged changes readable`);

  // A final read after the load, then the same history with that read turned into one that misses every write.
  const final = await recorder.read(api, s.org, 'one', REGISTER_BOOKMARK, 'check');
  t.equal(final.outcome, 'ok');
  t.ok(checkRegisterHistory(recorder.ops).linearizable, 'the final read fits');
  const lost = recorder.ops.map((h) => (h === recorder.ops.at(-1) ? { ...h, op: { f: 'read' as const, value: ROOT_CHANGE } } : h));
  t.notOk(checkRegisterHistory(lost).linearizable, 'a read that misses acknowledged writes is caught');
});
