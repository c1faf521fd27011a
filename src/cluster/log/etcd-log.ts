import { Etcd3, GRPCDeadlineExceededError, GRPCUnavailableError, Range, type IKeyValue, type Watcher } from 'etcd3';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import { ShardLogFenced, ShardLogUnavailable, ShardLogUnknownOutcome, appendLanded, type ShardLog, type ShardLogEntry, type ShardLogTail } from '../shard-log.js';
import { watchCreated } from '../control/etcd-client.js';
import { EntryChain } from './entry-chain.js';
import { retryUnavailable, untilAvailable } from './retry-unavailable.js';
import { OpenTails, TailDelivery } from './tail-delivery.js';

/** Digits of a sequence in an entry key, so keys sort in sequence order (2^53 has 16). */
const SEQ_DIGITS = 16;
/** Entries a tail reads per request while it catches up. */
const CATCH_UP_BATCH = 256;

export interface EtcdLogOptions {
  hosts: string[];
  cluster: string;
  /** Deadline of every call: without one a call to a dead member hangs for seconds. */
  timeoutMs?: number;
  /** How long a call keeps retrying while the log is unavailable (no leader, election). */
  unavailableBudgetMs?: number;
}

/**
 * The shard log on etcd: entry `/rh/<cluster>/log/<shard>/<seq>` holds the record behind its id,
 * and `/rh/<cluster>/log/<shard>/head` the last sequence. Sequences are contiguous; an append is
 * one transaction that compares the head with the expected last sequence, then writes the entry
 * and the new head. etcd fsyncs every commit, but its request limit (1.5 MiB) and its MVCC
 * history (deleted entries stay until compaction) suit small deployments and tests.
 */
export class EtcdShardLog implements ShardLog {
  /**
   * The largest record appended as one entry: etcd refuses a request above 1.5 MiB (its
   * default), and the append's transaction also carries the keys, the id and the head. Larger
   * records go in pieces (piece-log.ts).
   */
  readonly maxEntryBytes = 1280 * 1024;

  private readonly client: Etcd3;
  private readonly unavailableBudgetMs: number;
  private readonly tails = new OpenTails();

  constructor(private readonly opts: EtcdLogOptions) {
    const timeoutMs = opts.timeoutMs ?? 1000;
    // The client's own retries (on another member, after a transport error) are safe for appends
    // too: a second copy of the transaction is refused, and the refusal finds the first by its id.
    this.client = new Etcd3({
      hosts: opts.hosts,
      dialTimeout: timeoutMs,
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + timeoutMs }),
      // A read of many entries, each up to a staged 1 MiB chunk, is far above gRPC's 4 MiB default
      // for a reply; a limit there would stall a follower for good.
      grpcOptions: { 'grpc.max_receive_message_length': -1 },
    });
    this.unavailableBudgetMs = opts.unavailableBudgetMs ?? 10_000;
  }

  async append(shard: number, expectedLast: number, id: string, record: Uint8Array): Promise<number> {
    const head = this.headKey(shard);
    const seq = expectedLast + 1;
    const value = encodeEntry(id, record);
    return retryUnavailable(this.unavailableBudgetMs, async () => {
      let res;
      try {
        const guard = expectedLast === 0 ? this.client.if(head, 'Version', '==', 0) : this.client.if(head, 'Value', '==', String(expectedLast));
        res = await guard
          .then(this.client.put(this.entryKey(shard, seq)).value(value), this.client.put(head).value(String(seq)))
          .else(this.client.get(head))
          .commit();
      } catch (err) {
        throw failure(shard, err, true);
      }
      if (res.succeeded) return seq;
      // A retried append (by this client's own retry policy or the caller's) finds its first copy.
      const landed = await appendLanded(this, shard, expectedLast, id);
      if (landed !== null) return landed;
      const actual = res.responses[0]?.response_range?.kvs?.[0]?.value;
      throw new ShardLogFenced(shard, expectedLast, actual ? Number(actual.toString()) : 0);
    });
  }

  async last(shard: number): Promise<number> {
    return retryUnavailable(this.unavailableBudgetMs, async () => {
      try {
        return Number((await this.client.get(this.headKey(shard)).string()) ?? 0);
      } catch (err) {
        throw failure(shard, err, false);
      }
    });
  }

  async read(shard: number, after: number, limit: number): Promise<ShardLogEntry[]> {
    const chain = new EntryChain(shard, after);
    return (await this.readRange(shard, after, limit)).entries.filter((e) => chain.accept(e));
  }

  tail(shard: number, after: number, onEntries: (entries: ShardLogEntry[]) => Promise<void>): ShardLogTail {
    let watcher: Watcher | null = null;
    let wake: () => void = () => undefined;
    const stopping = new AbortController();
    const delivery = new TailDelivery(shard, after, onEntries, async () => {
      stopping.abort();
      wake();
      await watcher?.cancel();
    });
    return this.tails.start(delivery, async () => {
      while (delivery.active) {
        const range = await untilAvailable(
          () => delivery.active,
          () => this.readRange(shard, delivery.position, CATCH_UP_BATCH),
        );
        if (!range) return;
        const { entries, revision } = range;
        for (const e of entries) await delivery.push(e);
        if (entries.length === CATCH_UP_BATCH || !delivery.active) continue;
        // Caught up as of `revision`: watch from the next one, so no append falls in between.
        let pushing = Promise.resolve();
        const w = await watchCreated(this.client.watch().prefix(this.prefix(shard)).startRevision(String(revision + 1)).watcher(), stopping.signal);
        if (!w) return;
        watcher = w;
        await new Promise<void>((resolve) => {
          wake = resolve;
          w.on('put', (kv: IKeyValue) => {
            const entry = this.entryOf(shard, kv);
            if (entry) pushing = pushing.then(() => delivery.push(entry));
          });
          // A lost or compacted watch: catch up by reading again.
          w.on('error', () => resolve());
          w.on('end', () => resolve());
          if (!delivery.active) resolve();
        });
        await pushing;
        await w.cancel().catch(() => undefined);
      }
    });
  }

  async trim(shard: number, upTo: number): Promise<void> {
    await retryUnavailable(this.unavailableBudgetMs, async () => {
      try {
        const last = Number((await this.client.get(this.headKey(shard)).string()) ?? 0);
        // The last entry stays: readers check each entry against the one before.
        const end = Math.min(upTo, last - 1);
        if (end >= 1) await this.client.delete().inRange(new Range(this.entryKey(shard, 0), this.entryKey(shard, end + 1))).exec();
      } catch (err) {
        throw failure(shard, err, false);
      }
    });
  }

  async close(): Promise<void> {
    await this.tails.stopAll();
    this.client.close();
  }

  /** Entries after `after` and the store revision they were read at. */
  private async readRange(shard: number, after: number, limit: number): Promise<{ entries: ShardLogEntry[]; revision: number }> {
    return retryUnavailable(this.unavailableBudgetMs, async () => {
      try {
        // Entry keys end in digits, which sort before ':' and the head key.
        const res = await this.client
          .getAll()
          .inRange(new Range(this.entryKey(shard, after + 1), `${this.prefix(shard)}:`))
          .sort('Key', 'Ascend')
          .limit(limit)
          .exec();
        const entries = res.kvs.map((kv) => this.entryOf(shard, kv)).filter((e): e is ShardLogEntry => e !== null);
        return { entries, revision: Number(res.header.revision) };
      } catch (err) {
        throw failure(shard, err, false);
      }
    });
  }

  private entryOf(shard: number, kv: IKeyValue): ShardLogEntry | null {
    const suffix = kv.key.toString().slice(this.prefix(shard).length);
    if (!/^\d+$/.test(suffix)) return null;
    const seq = Number(suffix);
    return { seq, prev: seq - 1, ...decodeEntry(kv.value) };
  }

  private prefix(shard: number): string {
    if (!Number.isInteger(shard) || shard < 0 || shard >= SHARD_COUNT) throw new RangeError(`shard ${shard} out of range`);
    return `/rh/${this.opts.cluster}/log/${shard}/`;
  }

  private entryKey(shard: number, seq: number): string {
    return this.prefix(shard) + String(seq).padStart(SEQ_DIGITS, '0');
  }

  private headKey(shard: number): string {
    return `${this.prefix(shard)}head`;
  }
}

/** An entry's value: the id's length (2 bytes), the id, then the record. */
function encodeEntry(id: string, record: Uint8Array): Buffer {
  const idBytes = Buffer.from(id, 'utf8');
  if (idBytes.length > 0xffff) throw new RangeError('record id too long');
  const out = Buffer.allocUnsafe(2 + idBytes.length + record.length);
  out.writeUInt16BE(idBytes.length, 0);
  idBytes.copy(out, 2);
  out.set(record, 2 + idBytes.length);
  return out;
}

function decodeEntry(value: Buffer): { id: string; record: Uint8Array } {
  const idLength = value.readUInt16BE(0);
  return { id: value.toString('utf8', 2, 2 + idLength), record: value.subarray(2 + idLength) };
}

/**
 * The typed error for a failed call. "no leader" refuses a call before it is proposed; a
 * deadline or a lost connection leaves an append's outcome unknown.
 */
function failure(shard: number, err: unknown, appending: boolean): unknown {
  if (err instanceof ShardLogUnavailable || err instanceof ShardLogFenced) return err;
  const message = err instanceof Error ? err.message : '';
  if (/no leader|circuit|not connected|ECONNREFUSED/i.test(message)) return new ShardLogUnavailable(shard, { cause: err });
  if (err instanceof GRPCDeadlineExceededError || err instanceof GRPCUnavailableError) {
    return appending ? new ShardLogUnknownOutcome(shard, { cause: err }) : new ShardLogUnavailable(shard, { cause: err });
  }
  return err;
}
