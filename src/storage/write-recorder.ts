import { ABORT, asBinary, type Database, type Key, type TransactionFlags } from 'lmdb';
import { COMMIT_THEN_SYNC } from './commit-flags.js';
import { putIfAbsent, type Storage } from './database.js';
import { encodeKey, shardOfKey, type KeyRange } from './keys.js';
import type { CommittedWrites, ShardWrites, WriteDb, WriteOp, WriteSink } from './write-set.js';

/** An op with the shard it belongs to (-1: a global key). */
interface Recorded {
  shard: number;
  op: WriteOp;
}

const GLOBAL = -1;

/** A sealed transaction's commit number per shard it wrote; null when the recorder does not seal. */
type Commits = Map<number, number> | null;

/**
 * Records what one thread writes through a recording `Storage` (`recordingStorage`): the ops of
 * the open transaction, dropped with a child transaction that rolls back, handed to the sink with
 * the commit order once the outermost transaction has committed.
 */
export class WriteRecorder {
  /** The open transaction's ops; null while none is open on this thread. */
  open: Recorded[] | null = null;
  private last: ReturnType<WriteSink> = undefined;

  /**
   * `seal`, if given, runs inside each outermost transaction (asynchronous ones included) after
   * its work, with the shards it wrote (ascending), and may write more: cluster mode numbers each
   * shard's commits there and returns the numbers (one per shard, in that order), which the sink
   * then gets with the ops.
   */
  constructor(
    private readonly sink: WriteSink,
    private readonly seal?: (shards: number[]) => number[],
  ) {}

  /** The sink's answer for the outermost transaction this thread committed last (once). */
  takeCommitted(): ReturnType<WriteSink> {
    const last = this.last;
    this.last = undefined;
    return last;
  }

  record(db: WriteDb, kind: WriteOp['kind'], key: Key, value?: Uint8Array, end?: Key): void {
    const op: WriteOp = { db, kind, key: encodeKey(key) };
    if (value) op.value = value;
    if (end !== undefined) op.end = encodeKey(end);
    const recorded = { shard: shardOfKey(key) ?? GLOBAL, op };
    if (this.open) this.open.push(recorded);
    else throw new Error('a recorded write outside a transaction');
  }

  /** Runs `fn` as the outermost transaction of this thread and hands its ops over once committed. */
  outermost<T>(run: (fn: () => T) => T, fn: () => T): T {
    const ops: Recorded[] = (this.open = []);
    let order = 0n;
    let commits: Commits = null;
    let result: T;
    try {
      result = run(() => {
        const value = fn();
        if (value !== ABORT) commits = this.sealed(ops);
        order = process.hrtime.bigint();
        return value;
      });
    } finally {
      this.open = null;
    }
    if (result !== ABORT) this.committed(ops, order, commits);
    return result;
  }

  /** Inside the transaction that made `ops`, once its work is done: seals it, if this recorder seals. */
  sealed(ops: Recorded[]): Commits {
    if (!this.seal) return null;
    const shards = shardsOf(ops);
    const numbers = this.seal(shards);
    return new Map(shards.map((shard, i) => [shard, numbers[i]!]));
  }

  /** Runs a nested transaction; a child that rolls back (throws or aborts) drops its ops. */
  nested<T>(child: boolean, run: () => T): T {
    const open = this.open!;
    const mark = open.length;
    try {
      const result = run();
      if (child && result === ABORT) open.length = mark;
      return result;
    } catch (err) {
      if (child) open.length = mark;
      throw err;
    }
  }

  committed(ops: Recorded[], order: bigint, commits: Commits): void {
    try {
      this.last = this.sink(group(ops, order, commits));
    } catch (err) {
      // The transaction did commit: a failing sink fails the replication, not the commit. Marked
      // handled, since only a batch takes it.
      const failed = Promise.reject(err);
      failed.catch(() => undefined);
      this.last = failed;
    }
  }
}

/** The shards `ops` write, ascending. */
function shardsOf(ops: Recorded[]): number[] {
  const shards = new Set<number>();
  for (const { shard } of ops) if (shard !== GLOBAL) shards.add(shard);
  return [...shards].sort((a, b) => a - b);
}

/** Ops by shard (ascending), global keys apart, each in the order it was made. */
function group(ops: Recorded[], order: bigint, commits: Commits): CommittedWrites {
  const byShard = new Map<number, WriteOp[]>();
  const global: WriteOp[] = [];
  for (const { shard, op } of ops) {
    if (shard === GLOBAL) {
      global.push(op);
      continue;
    }
    let list = byShard.get(shard);
    if (!list) byShard.set(shard, (list = []));
    list.push(op);
  }
  const shards: ShardWrites[] = [...byShard]
    .sort((a, b) => a[0] - b[0])
    .map(([shard, list]) => {
      const commit = commits?.get(shard);
      return commit === undefined ? { shard, ops: list } : { shard, ops: list, commit };
    });
  return { order, shards, global };
}

/**
 * `storage` with every write recorded by `recorder`. Reads pass through untouched; writes of the
 * three databases go to LMDB as the bytes recorded (`asBinary`), so what is recorded is exactly
 * what is stored. Write calls lmdb-js offers but nothing here records (conditional writes other
 * than `noOverwrite`, clears, drops) throw, so that no write can bypass the record.
 */
export function recordingStorage(storage: Storage, recorder: WriteRecorder): Storage {
  const root = transactions(storage.root, recorder);
  // lmdb-js's encoder of the database (msgpack), declared `any` by its types.
  const encoder = (storage.meta as unknown as { encoder: { encode(value: unknown): Uint8Array } }).encoder;
  return {
    root,
    meta: recorded(storage.meta, 'meta', recorder, (value) => Uint8Array.prototype.slice.call(encoder.encode(value))),
    objects: recorded(storage.objects, 'objects', recorder, binary),
    chunks: recorded(storage.chunks, 'chunks', recorder, binary),
    close: () => storage.close(),
    recorder,
  };
}

/** A copy: the caller may reuse its buffer once the write call returns. */
const binary = (value: unknown): Uint8Array => Uint8Array.prototype.slice.call(value as Uint8Array);

type Encode = (value: unknown) => Uint8Array;

/** The database each recording view writes to. */
const underlying = new WeakMap<object, Database<unknown, Key>>();

/** A view of `db` (reads inherited) whose transactions are recorded by `recorder`. */
function transactions<D extends object>(of: D, recorder: WriteRecorder): D {
  const view = Object.create(of) as D;
  underlying.set(view, of as unknown as Database<unknown, Key>);
  const db = of as unknown as Database<unknown, Key>;
  const refuse = (name: string) => (): never => {
    throw new Error(`${name} is not recorded: use put or remove`);
  };
  for (const name of ['ifVersion', 'ifNoExists', 'batch', 'clearSync', 'clearAsync', 'drop', 'dropSync', 'transactionAsync', 'childTransaction', 'del']) {
    Object.defineProperty(view, name, { value: refuse(name) });
  }
  Object.defineProperty(view, 'transactionSync', {
    value<T>(fn: () => T, flags?: TransactionFlags): T {
      if (!recorder.open) return recorder.outermost((wrapped) => db.transactionSync(wrapped, flags), fn);
      // lmdb-js runs a nested call as a child transaction unless flags say otherwise.
      const child = flags === undefined || (flags & 1) !== 0;
      return recorder.nested(child, () => db.transactionSync(fn, flags));
    },
  });
  Object.defineProperty(view, 'transaction', {
    value<T>(fn: () => T): Promise<T> {
      // Inside a transaction, lmdb-js runs `fn` in it at once.
      if (recorder.open) return db.transaction(fn);
      // An asynchronous transaction: `fn` runs later, in lmdb-js's write batch; its writes commit
      // with the batch, even when it throws (lmdb-js does not roll a plain callback back). Its ops
      // are handed over when the batch settles. It is sealed like any other, even when `fn`
      // throws: its writes commit all the same, and a shard's commit numbers must stay contiguous
      // (a replica waits for a missing number, then gives the shard's copy up).
      let ops: Recorded[] | null = null;
      let order = 0n;
      let commits: Commits = null;
      // A rejection from `fn` leaves its writes committed; one from the commit itself, none.
      let threw = false;
      const settled = (): void => {
        if (ops) recorder.committed(ops, order, commits);
      };
      return db
        .transaction(() => {
          const open: Recorded[] = (ops = recorder.open = []);
          try {
            return fn();
          } catch (err) {
            threw = true;
            throw err;
          } finally {
            commits = recorder.sealed(open);
            order = process.hrtime.bigint();
            recorder.open = null;
          }
        })
        .then(
          (value) => {
            settled();
            return value;
          },
          (err: unknown) => {
            if (threw) settled();
            throw err;
          },
        );
    },
  });
  return view;
}

const isNoOverwrite = (options: unknown): boolean =>
  typeof options === 'object' && options !== null && Object.keys(options).length === 1 && (options as { noOverwrite?: unknown }).noOverwrite === true;

/**
 * `transactions(db)` whose puts and removes are recorded as ops of `name`. The one conditional
 * write it takes is `putSync(key, value, { noOverwrite: true })`, which a follower can replay as
 * a plain put because it is recorded only when it wrote.
 */
function recorded<V>(db: Database<V, Key>, name: WriteDb, recorder: WriteRecorder, encode: Encode): Database<V, Key> {
  const view = transactions(db, recorder);
  const raw = db as unknown as Database<unknown, Key>;
  const checked = (extra: number): void => {
    if (extra > 0) throw new Error('conditional writes are not recorded');
  };
  /** Runs a write in the open transaction, or in one of its own (lmdb-js does the same). */
  const inTransaction = <T>(write: () => T): T => (recorder.open ? write() : view.transactionSync(write, COMMIT_THEN_SYNC));
  const putBytes = (key: Key, bytes: Uint8Array): unknown => {
    recorder.record(name, 'put', key, bytes);
    return raw.putSync(key, asBinary(bytes));
  };
  /** A put that leaves an existing key as it is: recorded only when it wrote. */
  const putNewBytes = (key: Key, bytes: Uint8Array): boolean => {
    const wrote = putIfAbsent(raw, key, asBinary(bytes));
    if (wrote) recorder.record(name, 'put', key, bytes);
    return wrote;
  };
  Object.defineProperty(view, 'putSync', {
    value(key: Key, value: V, ...rest: unknown[]): unknown {
      if (rest.length === 1 && isNoOverwrite(rest[0])) return inTransaction(() => putNewBytes(key, encode(value)));
      checked(rest.length);
      return inTransaction(() => putBytes(key, encode(value)));
    },
  });
  Object.defineProperty(view, 'removeSync', {
    value(key: Key, ...rest: unknown[]): unknown {
      checked(rest.length);
      return inTransaction(() => {
        recorder.record(name, 'del', key);
        return raw.removeSync(key);
      });
    },
  });
  // Outside a transaction, `put` and `remove` are lmdb-js's asynchronous writes: each is recorded
  // as a transaction of its own once it has committed.
  Object.defineProperty(view, 'put', {
    value(key: Key, value: V, ...rest: unknown[]): Promise<unknown> {
      checked(rest.length);
      // Encoded now, as lmdb-js does: the caller may reuse its buffer once `put` returns.
      const bytes = encode(value);
      if (recorder.open) return Promise.resolve(putBytes(key, bytes));
      return view.transaction(() => putBytes(key, bytes));
    },
  });
  Object.defineProperty(view, 'remove', {
    value(key: Key, ...rest: unknown[]): Promise<unknown> {
      checked(rest.length);
      if (recorder.open) return Promise.resolve(view.removeSync(key));
      return view.transaction(() => view.removeSync(key));
    },
  });
  return view;
}

/**
 * Removes every key of `range` from `storage[name]`, in the caller's transaction. Recorded as one
 * `delRange` op rather than one op per key, so that deleting a repository of 100,000 objects is a
 * small write set; a follower removes the same keys, since the range holds there what it held here.
 */
export function removeRange(storage: Storage, name: WriteDb, range: KeyRange): void {
  const db = storage[name] as Database<unknown, Key>;
  // Keys are collected before removing: a cursor is not walked while its range is being deleted.
  const keys = [...db.getKeys(range)];
  const { recorder } = storage;
  if (!recorder) {
    for (const key of keys) db.removeSync(key);
    return;
  }
  if (keys.length === 0) return;
  if (!recorder.open) {
    // In a transaction of its own, as a write outside one is.
    storage.root.transactionSync(() => removeRange(storage, name, range), COMMIT_THEN_SYNC);
    return;
  }
  recorder.record(name, 'delRange', range.start, undefined, range.end);
  const raw = underlying.get(db)!;
  for (const key of keys) raw.removeSync(key);
}

/**
 * Runs `fn` as one write transaction, the outermost of this thread, and returns the sink's answer
 * for its writes (see `WriteSink`) when `storage` records, undefined otherwise. Nothing is
 * allocated for the answer: a batch commits through here.
 */
export function commitWrites(storage: Storage, fn: () => void, flags?: TransactionFlags): ReturnType<WriteSink> {
  storage.root.transactionSync(fn, flags);
  return storage.recorder?.takeCommitted();
}
