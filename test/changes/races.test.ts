import t from 'tap';
import { ROOT, applyOps, exportRepo, startWithRepo, write, type RepoFixture } from './helpers.js';

const CLIENTS = 20;

async function evolution(f: RepoFixture, id: string): Promise<string[]> {
  const res = await f.s.api('GET', `${f.base}/changes/${id}/evolution?limit=200`);
  return (res.json.evolution as Array<{ commit_oid: string }>).map((e) => e.commit_oid).reverse();
}

t.test('races - 20 clients evolving one change without a guard all apply, in some serial order', async (t) => {
  const f = await startWithRepo(t, 'race-free');
  const base = await applyOps(f, { base_change_id: ROOT, ops: [write('f.txt', 'start\n')] });
  const id = base.json.change.id as string;
  const results = await Promise.all(
    Array.from({ length: CLIENTS }, (_, i) => applyOps(f, { change_id: id, message: `client ${i}`, ops: [write('f.txt', `client ${i}\n`), write(`c${i}.txt`, `${i}\n`)] })),
  );
  t.same(results.map((r) => r.status).filter((s) => s !== 200 && s !== 409), [], 'every answer is 200 or 409');
  const ok = results.map((r, i) => ({ i, r })).filter(({ r }) => r.status === 200);
  t.equal(ok.length, CLIENTS, 'without a guard nothing is lost');

  // The evolution is the serial order; each answer's commit is one step of it.
  const chain = await evolution(f, id);
  t.equal(chain.length, CLIENTS + 1);
  t.equal(chain[0], base.json.change.current_commit_oid);
  const position = new Map(ok.map(({ i, r }) => [r.json.change.current_commit_oid as string, i]));
  t.same(new Set(chain.slice(1)), new Set(position.keys()), 'every acknowledged commit is in the evolution');

  const x = exportRepo(f);
  t.teardown(() => x.cleanup());
  t.equal(x.fsckProblems(), null);
  const order = chain.slice(1).map((oid) => position.get(oid)!);
  order.forEach((client, step) => {
    const files = x.git('ls-tree', '--name-only', chain[step + 1]!).stdout.trim().split('\n').sort();
    const expected = ['f.txt', ...order.slice(0, step + 1).map((c) => `c${c}.txt`)].sort();
    t.same(files, expected, `step ${step} holds the files of every write before it`);
    t.equal(x.git('show', `${chain[step + 1]}:f.txt`).stdout, `client ${client}\n`);
  });
  const final = await f.s.api('GET', `${f.base}/changes/${id}`);
  t.equal(final.json.current_commit_oid, chain[chain.length - 1]);
  t.equal(final.json.message, `client ${order[order.length - 1]}`);
});

t.test('races - 20 clients evolving one change with the same guard: one wins, 19 get ABORTED', async (t) => {
  const f = await startWithRepo(t, 'race-guard');
  const base = await applyOps(f, { base_change_id: ROOT, ops: [write('f.txt', 'start\n')] });
  const id = base.json.change.id as string;
  const guard = base.json.change.current_commit_oid as string;
  const results = await Promise.all(
    Array.from({ length: CLIENTS }, (_, i) => applyOps(f, { change_id: id, expected_commit_oid: guard, ops: [write('f.txt', `client ${i}\n`)] })),
  );
  t.same(results.map((r) => r.status).filter((s) => s !== 200 && s !== 409), [], 'every answer is 200 or 409');
  const winners = results.filter((r) => r.status === 200);
  t.equal(winners.length, 1, 'exactly one write wins');
  for (const r of results.filter((x) => x.status === 409)) {
    t.equal(r.json.error.code, 'ABORTED');
    t.equal(r.json.error.details.current_commit_oid, winners[0]!.json.change.current_commit_oid, 'the loser is told the current commit');
  }
  t.same(await evolution(f, id), [guard, winners[0]!.json.change.current_commit_oid]);

  // Mixed: guarded clients that read the current commit race unguarded ones.
  const current = winners[0]!.json.change.current_commit_oid as string;
  const mixed = await Promise.all(
    Array.from({ length: CLIENTS }, (_, i) => applyOps(f, { change_id: id, ...(i % 2 ? { expected_commit_oid: current } : {}), ops: [write(`m${i}.txt`, 'x')] })),
  );
  t.same(mixed.map((r) => r.status).filter((s) => s !== 200 && s !== 409), []);
  const applied = mixed.map((r, i) => ({ r, i })).filter(({ r }) => r.status === 200);
  const chain = await evolution(f, id);
  t.equal(chain.length, 2 + applied.length, 'one commit per acknowledged write');
  for (const { r, i } of mixed.map((r, i) => ({ r, i })).filter(({ r }) => r.status === 409)) {
    t.equal(i % 2, 1, 'only guarded writes lose');
    t.equal(r.json.error.code, 'ABORTED');
  }
  // A guarded write can only have won as the first write after `current`.
  const guardedWins = applied.filter(({ i }) => i % 2 === 1);
  t.ok(guardedWins.length <= 1);
  if (guardedWins.length === 1) t.equal(chain[2], guardedWins[0]!.r.json.change.current_commit_oid);
});

t.test('races - a write to a change that waited while an ancestor evolve rebased it is refused with ABORTED', async (t) => {
  const f = await startWithRepo(t, 'race-pending');
  // A long chain whose evolve keeps the repository's actor busy for a while: writes sent
  // meanwhile wait in the mailbox and are applied together in the next batch, in arrival order.
  let tip = ROOT;
  let chainRoot = '';
  let links = 0;
  const lengthen = async (by: number): Promise<void> => {
    for (let end = links + by; links < end; links++) {
      const r = await applyOps(f, { base_change_id: tip, ops: [write(`chain/${links}.txt`, `${links}\n`)] });
      tip = r.json.change.id;
      chainRoot ||= tip;
    }
  };
  await lengthen(80);
  const parent = await applyOps(f, { base_change_id: ROOT, ops: [write('p.txt', 'p\n')] });
  const child = await applyOps(f, { base_change_id: parent.json.change.id, ops: [write('c.txt', 'c\n')] });
  const childId = child.json.change.id as string;
  let refused = false;
  for (let attempt = 1; attempt <= 6 && !refused; attempt++) {
    const busy = applyOps(f, { change_id: chainRoot, ops: [write('chain/root.txt', `${attempt}\n`)] });
    // The two writes go 20 ms apart on their own connections so that they reach the mailbox in
    // this order, both while the busy evolve runs.
    await new Promise((r) => setTimeout(r, 20));
    const evolve = applyOps(f, { change_id: parent.json.change.id, ops: [write('p.txt', `p${attempt}\n`)] });
    await new Promise((r) => setTimeout(r, 20));
    const pending = applyOps(f, { change_id: childId, ops: [write('c.txt', `c${attempt}\n`)] });
    const [b, e, p] = await Promise.all([busy, evolve, pending]);
    t.equal(b.status, 200);
    t.equal(e.status, 200, e.text);
    t.ok(p.status === 200 || p.status === 409, `the pending write is applied or refused: ${p.text}`);
    if (p.status === 409) {
      t.equal(p.json?.error?.code, 'ABORTED', p.text);
      refused = true;
    } else {
      // A machine fast enough to finish the busy evolve before both writes were queued applies
      // them in separate batches, which is a serial order too: try again with a chain twice as long.
      t.comment(`attempt ${attempt}: the writes were not queued together behind a ${links}-link evolve`);
      await lengthen(links);
    }
  }
  t.ok(refused, 'the write queued behind the rebase of its change was refused with ABORTED');
  const now = await f.s.api('GET', `${f.base}/changes/${childId}`);
  t.not(now.json.current_commit_oid, child.json.change.current_commit_oid, 'the child was rebased');
  // A write arriving after the rebase applies; re-read and retried, the refused write goes through.
  const retry = await applyOps(f, { change_id: childId, expected_commit_oid: now.json.current_commit_oid, ops: [write('c.txt', 'c2\n')] });
  t.equal(retry.status, 200, retry.text);
  const plain = await applyOps(f, { change_id: childId, ops: [write('c.txt', 'c3\n')] });
  t.equal(plain.status, 200, 'later writes to a once-rebased change are not refused');
});
