/**
 * A linearizability checker for single-register histories (one bookmark = one register whose
 * value is a change id, or null while the bookmark does not exist).
 *
 * The history is split per key (a register's operations never constrain another's, so each key is
 * checked alone), then each key is searched in the manner of Wing & Gong with Lowe's refinements:
 * operations are linearized just in time (only a call whose return has not yet been passed can be
 * tried), and every reached (linearized set, register value) pair is remembered, so a
 * configuration is explored once. Operations with an unknown outcome ('info': a timeout, a 5xx, a
 * broken connection) may take effect at any point after their call, or never.
 */

export type RegisterValue = string | null;

export type RegisterOp =
  /** Observed the register holding `value` (null: the bookmark did not exist). */
  | { f: 'read'; value: RegisterValue }
  /** Set the register to `value` unconditionally. */
  | { f: 'write'; value: RegisterValue }
  /**
   * Set the register to `value` if it held `expected`. `applied` is what the reply said: true (it
   * moved), false (refused because the register held something else: also an observation).
   * Ignored for an 'info' operation, which may have applied or not.
   */
  | { f: 'cas'; expected: RegisterValue; value: RegisterValue; applied?: boolean };

export type Outcome =
  /** Acknowledged: it took effect (or observed what it says) once between call and return. */
  | 'ok'
  /** Definitely refused: it never took effect. */
  | 'fail'
  /** Unknown: it may have taken effect at any time after its call, or never. */
  | 'info';

export interface HistoryOp {
  key: string;
  op: RegisterOp;
  outcome: Outcome;
  /** When the client sent it (any monotonic clock, e.g. performance.now()). */
  invokedAt: number;
  /** When the client received the reply; ignored for 'info'. */
  completedAt: number;
  /** Who ran it, for reports. */
  client?: string;
}

export interface KeyVerdict {
  key: string;
  linearizable: boolean;
  /** Operations the search considered (after dropping definite failures and unknown reads). */
  operations: number;
  /** Configurations explored: the memo's size. */
  explored: number;
  /** When not linearizable: the deepest point the search reached, for the report. */
  stuck?: { linearized: number; value: RegisterValue; blocking: HistoryOp };
}

export interface Verdict {
  linearizable: boolean;
  keys: KeyVerdict[];
}

/** Checks every key of `history` with an initial register value of `initial` (default null). */
export function checkRegisterHistory(history: readonly HistoryOp[], initial: RegisterValue = null): Verdict {
  const byKey = new Map<string, HistoryOp[]>();
  for (const h of history) {
    let list = byKey.get(h.key);
    if (!list) byKey.set(h.key, (list = []));
    list.push(h);
  }
  const keys = [...byKey].map(([key, ops]) => checkKey(key, ops, initial));
  return { linearizable: keys.every((k) => k.linearizable), keys };
}

/** A human-readable account of a failed verdict (empty when linearizable). */
export function describeVerdict(v: Verdict): string {
  return v.keys
    .filter((k) => !k.linearizable)
    .map((k) => {
      const s = k.stuck!;
      const b = s.blocking;
      return `key ${k.key}: after ${s.linearized} of ${k.operations} operations the register holds ${JSON.stringify(s.value)}; no order fits ${JSON.stringify(b.op)} (${b.outcome}, ${b.client ?? 'client ?'}, ${b.invokedAt.toFixed(1)}–${b.completedAt.toFixed(1)})`;
    })
    .join('\n');
}

/** One operation in the search, with its call and return entries in the event list. */
interface Entry {
  op: number;
  isCall: boolean;
  /** A call's return entry (null for an unknown outcome: it returns at infinity). */
  match: Entry | null;
  prev: Entry | null;
  next: Entry | null;
  time: number;
}

/** The register's sequential specification: the value after `op`, or undefined if `op` cannot happen at `value`. */
function step(value: RegisterValue, op: RegisterOp, outcome: Outcome): RegisterValue | undefined {
  switch (op.f) {
    case 'read':
      return value === op.value ? value : undefined;
    case 'write':
      return op.value;
    case 'cas':
      // An unknown CAS that did not apply changed nothing, the same as not linearizing it at all.
      if (outcome === 'info' || op.applied !== false) return value === op.expected ? op.value : undefined;
      return value !== op.expected ? value : undefined;
  }
}

/** What an unknown operation wrote when nothing ever read or expected its value. */
const UNOBSERVED = '\u0000unobserved';

interface Prepared {
  h: HistoryOp;
  /** The operation as the search applies it. */
  op: RegisterOp;
  /** The time by which it must have taken effect; Infinity: it may never take effect. */
  deadline: number;
  /** Unknown operations with the same effect (see `prepare`) share a group; -1: none. */
  group: number;
}

/**
 * The operations the search needs. A definite failure never happened and an unknown read observed
 * nothing, so both go. Every unknown operation left open doubles the configurations the search
 * may visit, so unknown writes whose value is unique in the history (the workloads write fresh
 * values) are settled:
 * - if an acknowledged operation observed the value, the write happened before the earliest such
 *   observer returned;
 * - if nothing read or expected the value, the register holding it differs from holding any
 *   other unmentioned value only to a refused CAS; without refused CAS the write is dropped
 *   (applying it could only make the history harder to linearize), with them its value becomes
 *   one symbol, and writes (or CAS from the same expected value) with that effect are
 *   interchangeable: the search applies them in order of their calls only.
 */
function prepare(all: HistoryOp[], initial: RegisterValue): Prepared[] {
  const ops = all.filter((h) => h.outcome !== 'fail' && !(h.outcome === 'info' && h.op.f === 'read'));
  for (const h of ops) {
    if (h.outcome === 'ok' && !(h.completedAt >= h.invokedAt)) throw new Error(`operation completed before its call: ${JSON.stringify(h)}`);
  }
  const producers = new Map<RegisterValue, number>([[initial, 1]]);
  const observedBy = new Map<RegisterValue, number>();
  const mentioned = new Set<RegisterValue>();
  let refusals = false;
  for (const h of ops) {
    const o = h.op;
    if (o.f !== 'read') producers.set(o.value, (producers.get(o.value) ?? 0) + 1);
    if (o.f === 'read') mentioned.add(o.value);
    if (o.f === 'cas') mentioned.add(o.expected);
    if (o.f === 'cas' && h.outcome === 'ok' && o.applied === false) refusals = true;
    if (h.outcome !== 'ok' || (o.f === 'cas' && o.applied === false) || o.f === 'write') continue;
    // An acknowledged read or applied CAS saw this value in the register.
    const seen = o.f === 'read' ? o.value : o.expected;
    observedBy.set(seen, Math.min(observedBy.get(seen) ?? Infinity, h.completedAt));
  }
  const groups = new Map<string, number>();
  const out: Prepared[] = [];
  for (const h of ops) {
    const o = h.op;
    if (h.outcome === 'ok' || o.f === 'read') {
      out.push({ h, op: o, deadline: h.completedAt, group: -1 });
      continue;
    }
    const observed = observedBy.get(o.value);
    if (producers.get(o.value) !== 1 || mentioned.has(o.value) && observed === undefined) out.push({ h, op: o, deadline: Infinity, group: -1 });
    else if (observed !== undefined) out.push({ h, op: o, deadline: Math.max(observed, h.invokedAt), group: -1 });
    else if (refusals) {
      const effect = o.f === 'write' ? 'write' : `cas ${JSON.stringify(o.expected)}`;
      if (!groups.has(effect)) groups.set(effect, groups.size);
      out.push({ h, op: { ...o, value: UNOBSERVED }, deadline: Infinity, group: groups.get(effect)! });
    }
  }
  return out;
}

function checkKey(key: string, all: HistoryOp[], initial: RegisterValue): KeyVerdict {
  const prepared = prepare(all, initial);
  const ops = prepared.map((p) => p.h);
  const n = ops.length;
  // Each group's members in order of their calls, and how many of them are linearized.
  const members: number[][] = [];
  prepared.forEach((p, i) => p.group >= 0 && (members[p.group] ??= []).push(i));
  for (const m of members) m.sort((a, b) => ops[a]!.invokedAt - ops[b]!.invokedAt || a - b);
  const used = members.map(() => 0);
  // Operations that must be linearized: the acknowledged ones and the unknown ones seen to have happened.
  const required = prepared.map((p) => p.deadline !== Infinity);
  const events: Entry[] = [];
  for (let i = 0; i < n; i++) {
    const call: Entry = { op: i, isCall: true, match: null, prev: null, next: null, time: ops[i]!.invokedAt };
    events.push(call);
    if (required[i]) {
      const ret: Entry = { op: i, isCall: false, match: null, prev: null, next: null, time: prepared[i]!.deadline };
      call.match = ret;
      events.push(ret);
    }
  }
  // At equal times calls go first: operations that touch at an instant count as concurrent.
  events.sort((a, b) => a.time - b.time || (a.isCall === b.isCall ? 0 : a.isCall ? -1 : 1));
  const head: Entry = { op: -1, isCall: false, match: null, prev: null, next: null, time: -Infinity };
  let last = head;
  for (const e of events) {
    last.next = e;
    e.prev = last;
    last = e;
  }

  // Removing an operation's entries from the list, and putting them back, in O(1).
  const lift = (call: Entry): void => {
    call.prev!.next = call.next;
    if (call.next) call.next.prev = call.prev;
    const ret = call.match;
    if (ret) {
      ret.prev!.next = ret.next;
      if (ret.next) ret.next.prev = ret.prev;
    }
  };
  const unlift = (call: Entry): void => {
    const ret = call.match;
    if (ret) {
      ret.prev!.next = ret;
      if (ret.next) ret.next.prev = ret;
    }
    call.prev!.next = call;
    if (call.next) call.next.prev = call;
  };

  // The linearized set as a bit set with a Zobrist hash, so the memo compares sets only on a hash hit.
  const words = new Uint32Array(Math.ceil(n / 32) || 1);
  const zobrist = Array.from({ length: n }, () => (Math.random() * 2 ** 32) >>> 0);
  let hash = 0;
  const memo = new Map<string, Array<{ words: Uint32Array; value: RegisterValue }>>();
  let explored = 0;
  const remember = (value: RegisterValue): boolean => {
    const k = `${hash}|${value}`;
    let bucket = memo.get(k);
    if (!bucket) memo.set(k, (bucket = []));
    for (const seen of bucket) {
      if (seen.value === value && sameWords(seen.words, words)) return false;
    }
    bucket.push({ words: words.slice(), value });
    explored++;
    return true;
  };
  const toggle = (i: number): void => {
    words[i >>> 5]! ^= 1 << (i & 31);
    hash = (hash ^ zobrist[i]!) >>> 0;
  };

  let requiredLeft = required.filter(Boolean).length;
  let value = initial;
  const stack: Array<{ call: Entry; before: RegisterValue }> = [];
  let deepest: KeyVerdict['stuck'] = undefined;
  let entry = head.next;
  while (requiredLeft > 0) {
    // While required operations remain, their return entries are in the list, so a scan
    // from the head meets one before the end.
    const e = entry!;
    if (e.isCall) {
      const p = prepared[e.op]!;
      const after = p.group >= 0 && members[p.group]![used[p.group]!] !== e.op ? undefined : step(value, p.op, p.h.outcome);
      let moved = false;
      if (after !== undefined) {
        toggle(e.op);
        if (remember(after)) {
          stack.push({ call: e, before: value });
          value = after;
          if (required[e.op]) requiredLeft--;
          if (p.group >= 0) used[p.group]!++;
          lift(e);
          entry = head.next;
          moved = true;
        } else toggle(e.op);
      }
      if (!moved) entry = e.next;
      continue;
    }
    // The return of an operation not yet linearized: this order cannot work; undo the last choice.
    if (!deepest || stack.length > deepest.linearized) deepest = { linearized: stack.length, value, blocking: ops[e.op]! };
    const top = stack.pop();
    if (!top) return { key, linearizable: false, operations: n, explored, stuck: deepest };
    unlift(top.call);
    toggle(top.call.op);
    value = top.before;
    if (required[top.call.op]) requiredLeft++;
    if (prepared[top.call.op]!.group >= 0) used[prepared[top.call.op]!.group]!--;
    entry = top.call.next;
  }
  return { key, linearizable: true, operations: n, explored };
}

function sameWords(a: Uint32Array, b: Uint32Array): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
