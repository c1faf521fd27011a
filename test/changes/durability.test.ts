import t from 'tap';
import { ROOT, applyOps, exportRepo, startWithRepo, write } from './helpers.js';

const AGENTS = 8;

t.test('durability - after kill -9 during a burst of apply-ops, every acknowledged change is there with its content', async (t) => {
  const f = await startWithRepo(t, 'burst');
  const acked: Array<{ id: string; agent: number; seq: number }> = [];
  let stop = false;

  async function agent(n: number): Promise<void> {
    let base = ROOT;
    for (let seq = 0; !stop; seq++) {
      const res = await applyOps(f, {
        base_change_id: base,
        message: `agent ${n} write ${seq}`,
        ops: [write(`agents/${n}/latest.txt`, `agent ${n} write ${seq}\n`), write(`agents/${n}/w${seq}.txt`, `${seq}\n`)],
        bookmarks: [{ name: `agent-${n}`, create: true }],
      }).catch(() => null);
      // A refused connection or a reset mid-answer: the server is gone; the write is unknown.
      if (!res) return;
      if (res.status !== 201) throw new Error(`agent ${n}: ${res.status} ${res.text}`);
      acked.push({ id: res.json.change.id, agent: n, seq });
      base = res.json.change.id;
    }
  }

  const running = Array.from({ length: AGENTS }, (_, n) => agent(n));
  await new Promise((r) => setTimeout(r, 1500));
  await f.s.kill();
  stop = true;
  await Promise.all(running);
  t.ok(acked.length >= AGENTS, `${acked.length} writes were acknowledged before the kill`);

  await f.s.restart();
  for (const { id, agent: n, seq } of acked) {
    const res = await f.s.api('GET', `${f.base}/changes/${id}`).catch((err: Error) => {
      throw new Error(`${err.message}; server log tail:\n${f.s.logs.slice(-15).join('\n')}`);
    });
    t.equal(res.status, 200, `agent ${n} write ${seq} is readable`);
    t.equal(res.json.message, `agent ${n} write ${seq}`);
  }
  // Each agent's bookmark is at (or past) its last acknowledged change.
  for (let n = 0; n < AGENTS; n++) {
    const mine = acked.filter((a) => a.agent === n);
    if (mine.length === 0) continue;
    const listed = await f.s.api('GET', `${f.base}/changes?bookmark=agent-${n}&limit=200`);
    const ids = (listed.json.changes as Array<{ id: string }>).map((c) => c.id);
    t.ok(ids.includes(mine[mine.length - 1]!.id), `bookmark agent-${n} reaches its last acknowledged change`);
  }

  const x = exportRepo(f);
  t.teardown(() => x.cleanup());
  t.equal(x.fsckProblems(), null, 'no change points at a missing object: fsck --strict is clean');
  for (const { id, agent: n, seq } of acked) {
    const change = (await f.s.api('GET', `${f.base}/changes/${id}`)).json;
    t.equal(x.git('show', `${change.current_commit_oid}:agents/${n}/latest.txt`).stdout, `agent ${n} write ${seq}\n`, `content of agent ${n} write ${seq}`);
  }
  // The server keeps working after the restart.
  const more = await applyOps(f, { base_change_id: acked[0]!.id, ops: [write('after.txt', 'ok\n')] });
  t.equal(more.status, 201);
});
