/**
 * The replicated log of one shard's write sets: the durability and the fence of cluster mode. An
 * owner appends each batch's write set conditionally on the last sequence it has seen; an append
 * from a stale owner (one that missed a newer record) is refused with `ShardLogFenced`. Followers
 * read and tail the log into their own LMDB. Implemented on NATS JetStream and on etcd
 * (src/cluster/log/, opened by `openShardLog`).
 *
 * Sequences increase per shard but need not be contiguous (JetStream numbers a whole stream).
 * 0 means "nothing appended yet". Every entry records the sequence it was appended after
 * (`prev`), so a reader can tell a gap left by trimming from the stream's own numbering, and
 * skip a record the engine stored although its condition failed (src/cluster/log/entry-chain.ts):
 * `read` and `tail` return valid entries only.
 *
 * Errors: `ShardLogFenced` is a definite refusal; `ShardLogUnknownOutcome` means the append may or
 * may not have landed; `ShardLogUnavailable` means the log could not take the call (no leader,
 * re-election) and nothing was written. `ShardLogTrimmed` means a read started below the oldest
 * kept entry. Any other error is a bug or bad input.
 */
export interface ShardLog {
  /**
   * Appends `record` iff the shard's last sequence is `expectedLast`; resolves to its sequence.
   * `id` names the record uniquely (e.g. `node:epoch:batch:shard`): appending the same id again
   * after an unknown outcome resolves to the first copy's sequence when that copy landed right
   * after `expectedLast`, instead of a refusal, so a retry never writes a record twice.
   */
  append(shard: number, expectedLast: number, id: string, record: Uint8Array): Promise<number>;
  /** The shard's last sequence (0 when empty): the one the next append must expect. Read from the log's leader. */
  last(shard: number): Promise<number>;
  /**
   * Up to `limit` entries with a sequence above `after`, in order, read from the leader. Throws
   * `ShardLogTrimmed` when the first entry is not the one appended after `after` (it was trimmed).
   * To settle an unknown outcome: the append landed iff `read(shard, expectedLast, 1)[0].id` is its id.
   */
  read(shard: number, after: number, limit: number): Promise<ShardLogEntry[]>;
  /**
   * Delivers every entry above `after` in order, then each new one as it is appended, to
   * `onEntries` in batches; the next batch waits until the previous call's promise settles.
   * Survives a member's loss, and an outage of the whole log, by resuming after the last
   * delivered entry once it can. Ends (`done` rejects)
   * when `onEntries` throws or the entries after `after` were trimmed (`ShardLogTrimmed`).
   */
  tail(shard: number, after: number, onEntries: (entries: ShardLogEntry[]) => Promise<void>): ShardLogTail;
  /**
   * Drops the entries up to and including `upTo` (a snapshot covers them). The shard's last entry
   * is always kept, whatever `upTo` says: it carries the fence.
   */
  trim(shard: number, upTo: number): Promise<void>;
  close(): Promise<void>;
}

export interface ShardLogEntry {
  seq: number;
  /** The sequence this entry was appended after (its append's `expectedLast`). */
  prev: number;
  id: string;
  record: Uint8Array;
}

export interface ShardLogTail {
  /** Stops delivery; resolves once no `onEntries` call is running (so never await it inside one). */
  stop(): Promise<void>;
  /** Resolves after `stop()`; rejects with the error that ended the tail. */
  readonly done: Promise<void>;
}

/** A definite refusal: the shard's last sequence is not the expected one (a newer owner appended). */
export class ShardLogFenced extends Error {
  constructor(
    readonly shard: number,
    readonly expected: number,
    /** The shard's actual last sequence, when the log said it. */
    readonly actual: number | null,
  ) {
    super(`shard ${shard} log: expected last sequence ${expected}, actual ${actual ?? 'unknown'}`);
    this.name = 'ShardLogFenced';
  }
}

/** The append may or may not have landed (timeout, connection lost): settle it with `read`. */
export class ShardLogUnknownOutcome extends Error {
  constructor(readonly shard: number, options?: ErrorOptions) {
    super(`shard ${shard} log: append outcome unknown`, options);
    this.name = 'ShardLogUnknownOutcome';
  }
}

/** The log could not take the call (no leader, re-election, no member reachable); nothing written. */
export class ShardLogUnavailable extends Error {
  constructor(readonly shard: number, options?: ErrorOptions) {
    super(`shard ${shard} log: unavailable`, options);
    this.name = 'ShardLogUnavailable';
  }
}

/** The entries right after `after` were trimmed: the reader needs a snapshot first. */
export class ShardLogTrimmed extends Error {
  constructor(readonly shard: number, readonly after: number) {
    super(`shard ${shard} log: entries after ${after} were trimmed`);
    this.name = 'ShardLogTrimmed';
  }
}

/**
 * Settles an append: the sequence of the record `id` if it is the entry right after
 * `expectedLast`, else null (another record or none follows). Throws what `read` throws.
 */
export async function appendLanded(log: ShardLog, shard: number, expectedLast: number, id: string): Promise<number | null> {
  const [next] = await log.read(shard, expectedLast, 1);
  return next?.id === id && next.prev === expectedLast ? next.seq : null;
}
