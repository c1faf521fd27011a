import t from 'tap';
import fc from 'fast-check';
import { checkRegisterHistory, describeVerdict, type HistoryOp, type Outcome, type RegisterOp, type RegisterValue } from '../helpers/linearizability.js';

/** The register checker the fault scenarios judge their histories with. */

/** An operation on key `k` over [from, to] (time units are arbitrary). */
const op = (o: RegisterOp, from: number, to: number, outcome: Outcome = 'ok', key = 'k'): HistoryOp => ({ key, op: o, outcome, invokedAt: from, completedAt: to });
const read = (value: RegisterValue, from: number, to: number, outcome: Outcome = 'ok'): HistoryOp => op({ f: 'read', value }, from, to, outcome);
const write = (value: RegisterValue, from: number, to: number, outcome: Outcome = 'ok'): HistoryOp => op({ f: 'write', value }, from, to, outcome);
const cas = (expected: RegisterValue, value: RegisterValue, from: number, to: number, outcome: Outcome = 'ok', applied = true): HistoryOp => op({ f: 'cas', expected, value, applied }, from, to, outcome);

const linearizable = (h: HistoryOp[], initial: RegisterValue = null): boolean => checkRegisterHistory(h, initial).linearizable;

t.test('sequential histories', async (t) => {
  t.ok(linearizable([]), 'the empty history');
  t.ok(linearizable([read(null, 0, 1), write('a', 2, 3), read('a', 4, 5), cas('a', 'b', 6, 7), read('b', 8, 9)]));
  t.notOk(linearizable([write('a', 0, 1), read(null, 2, 3)]), 'a read misses a completed write');
  t.notOk(linearizable([write('a', 0, 1), write('b', 2, 3), read('a', 4, 5)]), 'a stale read');
  t.notOk(linearizable([read('a', 0, 1), write('a', 2, 3)]), 'a read sees a write not yet invoked');
  t.notOk(linearizable([write('a', 0, 1), cas('b', 'c', 2, 3)]), 'a CAS applied from a value the register did not hold');
  t.ok(linearizable([write('a', 0, 1), cas('b', 'c', 2, 3, 'ok', false), read('a', 4, 5)]), 'a refused CAS is an observation of another value');
  t.notOk(linearizable([write('a', 0, 1), cas('a', 'c', 2, 3, 'ok', false)]), 'a CAS refused although the register held its expected value');
  t.ok(linearizable([read('x', 0, 1)], 'x'), 'the initial value is given');
});

t.test('concurrent operations may take effect in either order', async (t) => {
  t.ok(linearizable([write('a', 0, 10), read('a', 1, 2)]), 'a read inside a write sees it');
  t.ok(linearizable([write('a', 0, 10), read(null, 1, 2)]), 'or does not');
  t.ok(linearizable([write('a', 0, 10), read('a', 1, 2), read(null, 3, 4)]) === false, 'but not first new then old');
  t.ok(linearizable([write('a', 0, 10), write('b', 0, 10), read('b', 11, 12), read('b', 13, 14)]));
  t.notOk(linearizable([write('a', 0, 10), write('b', 0, 10), read('b', 11, 12), read('a', 13, 14)]), 'the register flips back with no write in between');
  t.notOk(linearizable([write('a', 0, 1), cas('a', 'b', 2, 10), cas('a', 'c', 2, 10)]), 'two CAS from the same value both applied');
  t.ok(linearizable([write('a', 0, 1), cas('a', 'b', 2, 10), cas('a', 'c', 2, 10, 'ok', false), read('b', 11, 12)]), 'one of two racing CAS wins');
  t.notOk(linearizable([write('a', 0, 1), cas('a', 'b', 2, 10), cas('a', 'c', 2, 10, 'ok', false), read('c', 11, 12)]), 'the loser\'s value is read');
  // Touching intervals count as concurrent: the reply and the next call were seen at one instant.
  t.ok(linearizable([write('a', 0, 5), read(null, 5, 6)]));
});

t.test('operations with an unknown outcome may apply at any time after their call, or never', async (t) => {
  t.ok(linearizable([write('a', 0, 1), write('b', 2, 3, 'info'), read('a', 4, 5)]), 'never applied');
  t.ok(linearizable([write('a', 0, 1), write('b', 2, 3, 'info'), read('b', 100, 101)]), 'applied long after its timeout');
  t.notOk(linearizable([write('b', 0, 1, 'info'), read('b', 2, 3), read(null, 4, 5)]), 'once seen, it stays applied');
  t.notOk(linearizable([read('b', 0, 1), write('b', 2, 3, 'info')]), 'but never before its call');
  t.ok(linearizable([write('a', 0, 1), cas('a', 'b', 2, 3, 'info'), read('b', 4, 5)]), 'an unknown CAS that applied');
  t.notOk(linearizable([write('a', 0, 1), write('c', 2, 3), cas('a', 'b', 4, 5, 'info'), read('b', 6, 7)]), 'an unknown CAS applies only where its guard held');
  t.ok(linearizable([read('z', 0, 1, 'info'), read(null, 2, 3)]), 'an unknown read observed nothing');
  t.ok(linearizable([write('a', 0, 1, 'info'), write('b', 0, 1, 'info'), read('a', 2, 3), read('b', 4, 5)]), 'two unknown writes applied in some order');
  t.notOk(linearizable([write('a', 0, 1, 'info'), write('b', 0, 1, 'info'), read('a', 2, 3), read('b', 4, 5), read('a', 6, 7)]), 'but each at most once');
});

t.test('definite failures never took effect', async (t) => {
  t.notOk(linearizable([write('a', 0, 1, 'fail'), read('a', 2, 3)]), 'a refused write is never read');
  t.ok(linearizable([write('a', 0, 1, 'fail'), read(null, 2, 3)]));
  t.ok(linearizable([cas('x', 'a', 0, 1, 'fail'), read(null, 2, 3)]), 'a failed CAS is dropped whatever it expected');
});

t.test('keys are independent registers', async (t) => {
  const h = [op({ f: 'write', value: 'a' }, 0, 1, 'ok', 'k1'), op({ f: 'read', value: null }, 2, 3, 'ok', 'k2'), op({ f: 'read', value: 'a' }, 2, 3, 'ok', 'k1')];
  const v = checkRegisterHistory(h);
  t.ok(v.linearizable);
  t.same(v.keys.map((k) => k.key).sort(), ['k1', 'k2']);
  const bad = checkRegisterHistory([...h, op({ f: 'read', value: 'a' }, 4, 5, 'ok', 'k2')]);
  t.notOk(bad.linearizable);
  t.same(bad.keys.filter((k) => !k.linearizable).map((k) => k.key), ['k2'], 'only the broken key is reported');
  t.match(describeVerdict(bad), /key k2/);
});

t.test('a history that completes before its call is refused as input', async (t) => {
  t.throws(() => checkRegisterHistory([write('a', 5, 1)]), /completed before its call/);
});

/**
 * A history produced by a real sequential register: `clients` clients each run operations one
 * after another; every operation takes effect at a random instant inside its interval, and the
 * register's answers at those instants become the recorded results. Some operations lose their
 * reply ('info', applied or not) and some are refused ('fail', not applied). Values are unique
 * per write, so a corrupted read can be told from every legal one.
 */
interface Generated {
  history: HistoryOp[];
}

interface Plan {
  client: number;
  kind: 'read' | 'write' | 'cas';
  /** Start gap, duration, and where inside the interval it takes effect (0..1). */
  gap: number;
  duration: number;
  at: number;
  /** 0: acknowledged; 1: reply lost but applied; 2: reply lost, never applied; 3: refused. */
  fate: number;
  /** For a CAS: expect the current value (true) or some earlier one. */
  guardHolds: boolean;
}

const planArb = (clients: number): fc.Arbitrary<Plan> =>
  fc.record({
    client: fc.integer({ min: 0, max: clients - 1 }),
    kind: fc.constantFrom<Plan['kind']>('read', 'read', 'write', 'cas'),
    gap: fc.integer({ min: 0, max: 20 }),
    duration: fc.integer({ min: 1, max: 60 }),
    at: fc.double({ min: 0, max: 1, noNaN: true }),
    fate: fc.constantFrom(0, 0, 0, 0, 0, 1, 2, 3),
    guardHolds: fc.boolean(),
  });

function generate(plans: Plan[]): Generated {
  const clock = new Map<number, number>();
  const timed = plans.map((p, i) => {
    const start = (clock.get(p.client) ?? 0) + p.gap;
    const end = start + p.duration;
    clock.set(p.client, end + 1);
    return { p, i, start, end, effect: start + p.at * p.duration };
  });
  // Apply in order of effect instants to a plain variable: the register's sequential truth.
  let value: RegisterValue = null;
  const seen: RegisterValue[] = [null];
  const history: HistoryOp[] = [];
  for (const x of [...timed].sort((a, b) => a.effect - b.effect || a.i - b.i)) {
    const { p } = x;
    const outcome: Outcome = p.fate === 0 ? 'ok' : p.fate === 3 ? 'fail' : 'info';
    const applies = p.fate === 0 || p.fate === 1;
    const base = { key: 'k', invokedAt: x.start, completedAt: x.end, client: `c${p.client}` };
    if (p.kind === 'read') {
      history.push({ ...base, op: { f: 'read', value }, outcome });
    } else if (p.kind === 'write') {
      const v = `w${x.i}`;
      if (applies) value = v;
      seen.push(v);
      history.push({ ...base, op: { f: 'write', value: v }, outcome });
    } else {
      const v = `c${x.i}`;
      const expected = p.guardHolds ? value : seen[Math.floor(p.at * seen.length) % seen.length]!;
      const holds = expected === value;
      if (applies && holds) value = v;
      seen.push(v);
      // A refused guard is an acknowledged observation; a failed or unknown CAS says nothing.
      history.push({ ...base, op: { f: 'cas', expected, value: v, applied: holds }, outcome });
    }
  }
  return { history };
}

const historyArb = fc.integer({ min: 1, max: 6 }).chain((clients) => fc.array(planArb(clients), { minLength: 1, maxLength: 60 }));

t.test('property: every history of a real register is linearizable', async (t) => {
  fc.assert(
    fc.property(historyArb, (plans) => {
      const { history } = generate(plans);
      const v = checkRegisterHistory(history);
      if (!v.linearizable) throw new Error(describeVerdict(v));
    }),
    { numRuns: 300 },
  );
  t.pass('300 generated histories');
});

t.test('property: corrupting one acknowledged read makes the history non-linearizable', async (t) => {
  let corrupted = 0;
  fc.assert(
    fc.property(historyArb, fc.nat(), fc.boolean(), (plans, pick, future) => {
      const { history } = generate(plans);
      const reads = history.filter((h) => h.outcome === 'ok' && h.op.f === 'read');
      if (reads.length === 0) return;
      const victim = reads[pick % reads.length]!;
      // Either a value nobody ever wrote, or one written only by a write invoked after the read
      // returned (values are unique per write, so no other operation could have produced it).
      const later = history.find((h) => h.op.f !== 'read' && h.invokedAt > victim.completedAt);
      const bogus = future && later ? (later.op as { value: RegisterValue }).value : 'never-written';
      victim.op = { f: 'read', value: bogus };
      corrupted++;
      const v = checkRegisterHistory(history);
      if (v.linearizable) throw new Error(`accepted a read of ${JSON.stringify(bogus)} at ${victim.invokedAt}–${victim.completedAt}`);
    }),
    { numRuns: 300 },
  );
  t.ok(corrupted > 100, `${corrupted} corrupted histories refused`);
});

t.test('a few thousand concurrent operations on one key are checked in seconds', async (t) => {
  // The shape of a fault scenario's key: 8 clients, 5 % of the replies lost (half of those
  // applied), refused CAS recorded as definite failures as the history recorder does.
  const plans: Plan[] = [];
  let seed = 12345;
  const rnd = (): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let i = 0; i < 3000; i++) {
    plans.push({
      client: Math.floor(rnd() * 8),
      kind: (['read', 'read', 'write', 'cas'] as const)[Math.floor(rnd() * 4)]!,
      gap: Math.floor(rnd() * 5),
      duration: 1 + Math.floor(rnd() * 40),
      at: rnd(),
      fate: rnd() < 0.05 ? (rnd() < 0.5 ? 1 : 2) : 0,
      guardHolds: rnd() < 0.7,
    });
  }
  const history = generate(plans).history.map((h): HistoryOp => (h.op.f === 'cas' && h.op.applied === false && h.outcome === 'ok' ? { ...h, outcome: 'fail' } : h));
  const started = performance.now();
  const v = checkRegisterHistory(history);
  const ms = performance.now() - started;
  t.ok(v.linearizable, describeVerdict(v));
  t.ok(ms < 5000, `3000 operations from 8 clients checked in ${ms.toFixed(0)} ms (${v.keys[0]!.explored} configurations)`);
  // One read corrupted late in the run: refusing it means exploring every configuration before it.
  const lastRead = [...history].reverse().find((h) => h.outcome === 'ok' && h.op.f === 'read')!;
  lastRead.op = { f: 'read', value: 'never-written' };
  const started2 = performance.now();
  const bad = checkRegisterHistory(history);
  const ms2 = performance.now() - started2;
  t.notOk(bad.linearizable);
  t.ok(ms2 < 20_000, `refused in ${ms2.toFixed(0)} ms (${bad.keys[0]!.explored} configurations)`);
});
