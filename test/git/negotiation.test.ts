import t from 'tap';
import { ObjectGraph, type CommitNode } from '../../src/git/object-graph.js';
import { Readiness } from '../../src/git/negotiation.js';
import type { ObjectReader } from '../../src/storage/read/object-reader.js';
import { hashObject } from '../../src/vcs/git-object.js';

/**
 * Readiness (git's ok_to_give_up) over a v0 round whose common set grows with every have: each
 * check is bounded, and so are all the checks of one round together, so a body of a hundred
 * thousand haves alternating known and unknown does not hold a read thread for minutes.
 */
const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

/** A linear history of `n` commits, oldest first, on a graph that counts the commits it is asked for. */
function history(n: number): { graph: ObjectGraph; oids: string[]; asked: () => number } {
  const values = new Map<string, Buffer>();
  const oids: string[] = [];
  for (let i = 0; i < n; i++) {
    const parent = oids[i - 1];
    const content = Buffer.from(`tree ${EMPTY_TREE}\n${parent ? `parent ${parent}\n` : ''}author a <a@x> ${1e9 + i} +0000\ncommitter a <a@x> ${1e9 + i} +0000\n\nc${i}\n`);
    const oid = hashObject('commit', content);
    values.set(oid, Buffer.concat([Buffer.from([1]), content]));
    oids.push(oid);
  }
  const reader = {
    view: (oid: string) => values.get(oid),
    stableView: (oid: string) => values.get(oid),
    typeAndSize: (oid: string) => (values.has(oid) ? { type: 'commit', size: values.get(oid)!.length - 1 } : undefined),
  } as unknown as ObjectReader;
  let asked = 0;
  class Counting extends ObjectGraph {
    override commit(oid: string): CommitNode | undefined {
      asked++;
      return super.commit(oid);
    }
  }
  return { graph: new Counting(reader), oids, asked: () => asked };
}

t.test('readiness: the wants reach a common commit, or not', async (t) => {
  const { graph, oids } = history(100);
  const tip = oids[99]!;
  const none = new Readiness(graph, [tip]);
  t.notOk(none.ready(), 'no common commit: not ready');
  const some = new Readiness(graph, [tip]);
  some.addCommon(oids[50]!);
  t.ok(some.ready(), 'the tip reaches a common commit');
  const unrelated = history(10);
  const other = new Readiness(unrelated.graph, [unrelated.oids[9]!]);
  other.addCommon(oids[50]!);
  t.notOk(other.ready(), 'a have the repository lacks is not common');
});

t.test('readiness: the checks of one round read a bounded number of commits in all', async (t) => {
  // The client sends the history oldest first, each known have followed by one unknown: after
  // each, the common set grew and readiness is checked again (the tip is 20,000 commits away).
  const { graph, oids, asked } = history(20_000);
  const round = new Readiness(graph, [oids[19_999]!]);
  let checks = 0;
  let ready = false;
  for (let i = 0; i < 19_990 && !ready; i++) {
    round.addCommon(oids[i]!);
    ready = round.ready();
    checks++;
  }
  t.equal(checks, 19_990);
  // The common set read once, 100,000 commits of walks in all, the want looked up once.
  t.ok(asked() <= 19_990 + 100_000 + 2, `${asked()} commits asked for over ${checks} checks`);
  t.notOk(ready, 'past the round\'s budget the answer is "not ready" (always correct), even ten commits from the tip');
  const fresh = new Readiness(graph, [oids[19_999]!]);
  fresh.addCommon(oids[19_998]!);
  t.ok(fresh.ready(), 'a new round has a budget of its own');
});

t.test('readiness: wants are looked up once, however often they are repeated or checked', async (t) => {
  const { graph, oids, asked } = history(1_000);
  const round = new Readiness(graph, Array.from({ length: 100_000 }, () => oids[999]!));
  round.addCommon(oids[990]!);
  let ready = 0;
  for (let i = 0; i < 1_000; i++) if (round.ready()) ready++;
  t.equal(ready, 1_000, 'ready at every check');
  t.ok(asked() <= 20, `${asked()} commits asked for: the want once, the common commit, the walk to it`);
});
