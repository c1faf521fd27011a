import t from 'tap';
import { serverForFile } from '../helpers/server.js';
import { ROOT, bookmarkTarget, chain, createRepo } from './history.js';

/** Racing writers on one bookmark (API §6.3): serialized by the repository's actor, never 500. */

const s = await serverForFile(t);

interface Attempt {
  kind: 'guarded' | 'unguarded' | 'forward-only';
  to: string;
  expected?: string;
  status: number;
  code?: string;
  from?: string;
}

/** A deterministic sequence so that a failure can be replayed. */
function* lcg(seed: number): Generator<number> {
  let x = seed;
  for (;;) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    yield x;
  }
}

/**
 * True when the successful moves can be put in one order that starts at `initial`, where each
 * move starts where the previous one ended, and that ends at `final`: the outcome of some
 * serial execution. (An Euler path over the moves, found by backtracking.)
 */
function isSerialOrder(moves: Array<{ from: string; to: string }>, initial: string, final: string): boolean {
  const left = new Map<string, number>();
  for (const m of moves) left.set(`${m.from} ${m.to}`, (left.get(`${m.from} ${m.to}`) ?? 0) + 1);
  const walk = (at: string, remaining: number): boolean => {
    if (remaining === 0) return at === final;
    for (const [edge, count] of left) {
      const [from, to] = edge.split(' ') as [string, string];
      if (count === 0 || from !== at) continue;
      left.set(edge, count - 1);
      if (walk(to, remaining - 1)) return true;
      left.set(edge, count);
    }
    return false;
  };
  return walk(initial, moves.length);
}

t.test('races - 20 clients moving one bookmark end in the state of a serial order of the successful moves', async (t) => {
  await createRepo(s, 'race');
  const history = await chain(s, 'race', ROOT, 6);
  const position = new Map(history.map((id, i) => [id, i]));
  await s.api('POST', '/acme/race/bookmarks', { body: { name: 'hot', change_id: history[0] } });

  for (const seed of [7, 42, 1234]) {
    const initial = (await bookmarkTarget(s, 'race', 'hot'))!;
    const random = lcg(seed);
    const pick = (): string => history[random.next().value % history.length]!;
    const attempts = await Promise.all(
      Array.from({ length: 20 }, async (_, i): Promise<Attempt> => {
        const kind = (['guarded', 'unguarded', 'forward-only'] as const)[i % 3]!;
        const to = pick();
        const body: Record<string, unknown> = { change_id: to };
        let expected: string | undefined;
        if (kind === 'guarded') {
          // Optimistic concurrency: read the current target, then move only if it still holds.
          expected = (await bookmarkTarget(s, 'race', 'hot'))!;
          body.expected_change_id = expected;
          body.allow_backwards = true;
        } else if (kind === 'unguarded') body.allow_backwards = true;
        const res = await s.api('PATCH', '/acme/race/bookmarks/hot', { body });
        return { kind, to, expected, status: res.status, code: res.json?.error?.code, from: res.json?.from_change_id };
      }),
    );

    for (const a of attempts) {
      t.ok(a.status === 200 || a.status === 409, `${a.kind} move answered ${a.status} ${a.code ?? ''}`);
      if (a.status === 409) {
        const allowed = a.kind === 'guarded' ? 'ABORTED' : 'BOOKMARK_MOVE_HISTORY_REWRITE';
        t.equal(a.code, allowed, `a refused ${a.kind} move is ${allowed}`);
      }
    }
    const ok = attempts.filter((a) => a.status === 200);
    t.ok(ok.length > 0, 'some moves succeeded');
    for (const a of ok) {
      if (a.kind === 'guarded') t.equal(a.from, a.expected, 'a guarded move applied only from the state it expected');
      if (a.kind === 'forward-only') t.ok(position.get(a.from!)! <= position.get(a.to)!, 'a move without allow_backwards only advanced');
    }
    const final = (await bookmarkTarget(s, 'race', 'hot'))!;
    const codes = attempts.map((a) => a.code ?? a.status).join(' ');
    t.comment(`seed ${seed}: ${codes}`);
    const unreachable = history.find((id) => id !== initial && !ok.some((a) => a.to === id));
    if (unreachable) t.notOk(isSerialOrder(ok.map((a) => ({ from: a.from!, to: a.to })), initial, unreachable), 'the order check rejects an impossible end state');
    t.ok(
      isSerialOrder(
        ok.map((a) => ({ from: a.from!, to: a.to })),
        initial,
        final,
      ),
      `seed ${seed}: the final state is that of a serial order of the ${ok.length} successful moves`,
    );
  }
});

t.test('races - concurrent merges into one target apply one after another', async (t) => {
  await createRepo(s, 'merges');
  const [base] = await chain(s, 'merges', ROOT, 1);
  const sources: string[] = [];
  for (let i = 0; i < 6; i++) {
    const [c] = await chain(s, 'merges', base!, 1, `file-${i}.txt`);
    await s.api('POST', '/acme/merges/bookmarks', { body: { name: `src-${i}`, change_id: c } });
    sources.push(`src-${i}`);
  }
  const results = await Promise.all(sources.map((source) => s.api('POST', '/acme/merges/bookmarks/merge', { body: { target: 'main', source } })));
  for (const r of results) t.equal(r.status, 200, r.text);
  t.ok(results.every((r) => r.json.merge_type === 'merge_commit'));
  // Each merge's first parent is the previous merge: following first parents from the final
  // target visits every merge exactly once.
  const merges = new Set(results.map((r) => r.json.change_id as string));
  let at = (await bookmarkTarget(s, 'merges', 'main'))!;
  const seen: string[] = [];
  while (merges.has(at)) {
    seen.push(at);
    at = (await s.api('GET', `/acme/merges/changes/${at}`)).json.parents[0];
  }
  t.equal(seen.length, sources.length, 'every merge is on the target history, none was lost');
  t.equal(at, base, 'the first merge sits on the original target');
  const tip = (await s.api('GET', `/acme/merges/content?change_id=${seen[0]}&path=`)).json;
  for (let i = 0; i < 6; i++) t.ok(tip.entries.some((e: { path: string }) => e.path === `file-${i}.txt`), `file-${i}.txt is in the result`);
});
