import { setTimeout as sleep } from 'node:timers/promises';
import { connect, createInbox, errors as natsErrors, headers, nanos, type Msg, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type MsgRequest,
  type StreamConfig,
} from '@nats-io/jetstream';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import { ShardLogFenced, ShardLogUnavailable, ShardLogUnknownOutcome, appendLanded, type ShardLog, type ShardLogEntry, type ShardLogTail } from '../shard-log.js';
import { EntryChain } from './entry-chain.js';
import { retryUnavailable, untilAvailable } from './retry-unavailable.js';
import { OpenTails, TailDelivery } from './tail-delivery.js';

/** Shards share this many streams (shard mod STREAMS), so several Raft leaders share the work. */
const STREAMS = 4;
/** The streams' largest message. */
const MAX_MESSAGE_BYTES = 8 * 1024 * 1024;
/** Room left in a message for its headers (msg id, expected sequences, Rh-Prev). */
const ENTRY_HEADROOM_BYTES = 16 * 1024;
/** The header carrying the sequence an entry was appended after. */
const PREV_HEADER = 'Rh-Prev';
const MSG_ID_HEADER = 'Nats-Msg-Id';
/** A tail's pull requests last this long, and the server sends a heartbeat every half of it. */
const TAIL_PULL_EXPIRES_MS = 2000;
/** Missed heartbeats after which a tail replaces its consumer (3 s with the figure above). */
const TAIL_SILENT_HEARTBEATS = 3;
/** How often a tail checks that it moves while the leader holds entries past it. */
const TAIL_PROGRESS_CHECK_MS = 3000;

/** A tail's last progress check: where it stood, its subject's message count, and the count at which it was found caught up. */
interface TailCheck {
  position: number;
  count: number;
  caughtUpAt: number | null;
}
/** The count of a subject whose stream did not answer: the tail is checked against the leader. */
const UNKNOWN_COUNT = -1;

export interface JetStreamLogOptions {
  servers: string[];
  /** The cluster name: streams are `RH_<CLUSTER>_WAL_<k>`, subjects `rh.<cluster>.wal.<shard>`. */
  cluster: string;
  /** Stream replicas (3 in production). */
  replicas: number;
  /** Deadline of each request to the server. */
  timeoutMs?: number;
  /** How long a call keeps retrying while the log is unavailable (no leader, re-election). */
  unavailableBudgetMs?: number;
}

/**
 * The shard log on NATS JetStream: each shard is one subject of one of four R3 file streams, and
 * an append is a publish with `expect.lastSubjectSequence` (the fence) and the record's id as the
 * msgID (deduplicated for two minutes). Reads go to the stream leader (`allow_direct: false`).
 * nats-server 2.9 acknowledges before any fsync; see docs/design.md "Shard log".
 */
export class JetStreamShardLog implements ShardLog {
  private readonly tails = new OpenTails();
  /** Each tail's last progress check. */
  private readonly tailChecks = new WeakMap<TailDelivery, TailCheck>();
  /** Each stream's message count per subject, asked at most once per half check interval for all its tails. */
  private readonly subjectCounts = new Map<number, { at: number; counts: Promise<Record<string, number> | null> }>();

  /**
   * The largest record appended as one message: below the server's `max_payload` (1 MiB unless
   * configured) and the streams' `max_msg_size`, with room for the headers. Larger records go in
   * pieces (piece-log.ts).
   */
  get maxEntryBytes(): number {
    return Math.min(this.nc.info?.max_payload ?? 1024 * 1024, MAX_MESSAGE_BYTES) - ENTRY_HEADROOM_BYTES;
  }

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly cluster: string,
    private readonly timeoutMs: number,
    private readonly unavailableBudgetMs: number,
  ) {}

  static async open(opts: JetStreamLogOptions): Promise<JetStreamShardLog> {
    const timeoutMs = opts.timeoutMs ?? 2000;
    // noAsyncTraces: otherwise the client builds two errors with stack traces for every request
    // (a RequestError and a TimeoutError, in case it fails): 4 % of the nodes' busy time under writes.
    const nc = await connect({ servers: opts.servers, name: `repohost-log-${opts.cluster}`, maxReconnectAttempts: -1, reconnectTimeWait: 250, timeout: timeoutMs, noAsyncTraces: true });
    try {
      const jsm = await jetstreamManager(nc, { timeout: timeoutMs, checkAPI: false });
      const log = new JetStreamShardLog(nc, jetstream(nc, { timeout: timeoutMs }), jsm, opts.cluster, timeoutMs, opts.unavailableBudgetMs ?? 10_000);
      for (let k = 0; k < STREAMS; k++) await retryUnavailable(log.unavailableBudgetMs, () => log.ensureStream(k, opts.replicas));
      return log;
    } catch (err) {
      await nc.close();
      throw err;
    }
  }

  async append(shard: number, expectedLast: number, id: string, record: Uint8Array): Promise<number> {
    const subject = this.subject(shard);
    const hdrs = headers();
    hdrs.set(PREV_HEADER, String(expectedLast));
    return retryUnavailable(this.unavailableBudgetMs, async () => {
      let seq: number;
      try {
        // A duplicate ack names the first copy: the same id was stored before (a retried append).
        seq = (await this.js.publish(subject, record, { msgID: id, expect: { lastSubjectSequence: expectedLast }, headers: hdrs, timeout: this.timeoutMs })).seq;
      } catch (err) {
        if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence) {
          const landed = await appendLanded(this, shard, expectedLast, id);
          if (landed !== null) return landed;
          const actual = /wrong last sequence: (\d+)/.exec(err.message)?.[1];
          throw new ShardLogFenced(shard, expectedLast, actual === undefined ? null : Number(actual));
        }
        throw this.failure(shard, err, true);
      }
      // The server checked the expected sequence before proposing, not when storing (EntryChain):
      // the record won only if nothing was stored between the expected entry and it.
      let first: ShardLogEntry | undefined;
      try {
        [first] = await this.readOne(shard, expectedLast);
      } catch (err) {
        throw this.failure(shard, err, true);
      }
      if (first?.seq === seq) return seq;
      throw new ShardLogFenced(shard, expectedLast, null);
    });
  }

  async last(shard: number): Promise<number> {
    const stream = this.stream(shard);
    const subject = this.subject(shard);
    return this.retried(shard, async () => (await this.jsm.streams.getMessage(stream, { last_by_subj: subject }))?.seq ?? 0);
  }

  async read(shard: number, after: number, limit: number): Promise<ShardLogEntry[]> {
    const chain = new EntryChain(shard, after);
    const out: ShardLogEntry[] = [];
    let replicaBehind = false;
    // Invalid entries are skipped, so a batch may need another to fill it.
    while (out.length < limit) {
      const wanted = limit - out.length;
      const batched = wanted > 1 && !replicaBehind;
      const stored = await this.retried(shard, () => (batched ? this.readBatch(shard, chain.cursor, wanted) : this.readOne(shard, chain.cursor)));
      for (const e of stored) if (chain.accept(e)) out.push(e);
      if (stored.length === (batched ? wanted : 1)) continue;
      if (!batched) break;
      // A short batch is the end only if the leader has nothing later: the server may place the
      // batch's consumer on a replica that is still catching up (seen after a member's restart).
      // Then the rest comes from the leader, one get per entry.
      const last = await this.last(shard);
      if (chain.cursor >= last) break;
      replicaBehind = true;
    }
    return out;
  }

  tail(shard: number, after: number, onEntries: (entries: ShardLogEntry[]) => Promise<void>): ShardLogTail {
    let messages: ConsumerMessages | null = null;
    const delivery = new TailDelivery(shard, after, onEntries, async () => {
      await messages?.close();
    });
    return this.tails.start(delivery, async () => {
      while (delivery.active) {
        const consumer = await untilAvailable(
          () => delivery.active,
          () =>
            this.retried(shard, () =>
              this.js.consumers.get(this.stream(shard), {
                filter_subjects: this.subject(shard),
                deliver_policy: DeliverPolicy.StartSequence,
                opt_start_seq: delivery.position + 1,
              }),
            ),
        );
        if (!consumer || !delivery.active) return;
        const current = await consumer.consume({ max_messages: 256, expires: TAIL_PULL_EXPIRES_MS });
        messages = current;
        void this.closeWhenSilent(current);
        const watchdog = setInterval(() => void this.closeWhenStuck(shard, delivery, current), TAIL_PROGRESS_CHECK_MS);
        try {
          for await (const m of current) {
            await delivery.push(entryOf(m.seq, m.headers, m.data));
            if (!delivery.active) break;
          }
        } finally {
          clearInterval(watchdog);
        }
        // Closed because its server went silent: a new consumer resumes after the last entry.
        if (delivery.active) await sleep(100);
      }
    });
  }

  async trim(shard: number, upTo: number): Promise<void> {
    // Purging below `seq` keeps the last entry: the next append's condition needs it.
    const keepFrom = Math.min(upTo + 1, await this.last(shard));
    if (keepFrom > 1) await this.retried(shard, () => this.jsm.streams.purge(this.stream(shard), { filter: this.subject(shard), seq: keepFrom }));
  }

  async close(): Promise<void> {
    await this.tails.stopAll();
    await this.nc.close();
  }

  /**
   * Closes a tail's consumer once its server has been silent for TAIL_SILENT_HEARTBEATS
   * heartbeats. The client then only re-checks the consumer, and an ephemeral consumer that lived
   * on a killed server stayed silent for good (tails stalled 15 s and more after a kill -9).
   */
  private async closeWhenSilent(messages: ConsumerMessages): Promise<void> {
    for await (const status of messages.status()) {
      if (status.type === 'heartbeats_missed' && status.count >= TAIL_SILENT_HEARTBEATS) {
        await messages.close().catch(() => undefined);
        return;
      }
    }
  }

  /**
   * Closes a tail's consumer when the leader holds entries past the tail's position and the tail
   * did not move since the last check: a backstop for a consumer that answers heartbeats but
   * delivers nothing (a tail once stalled after a kill -9 with heartbeats flowing). A tail found
   * caught up is asked again only once its subject's message count has changed: a node follows
   * most shards, most of them idle, and asking each one's leader for its last entry every check
   * (a request per idle shard per 3 s) cost an idle 3-node cluster here a sixth of its CPU.
   */
  private async closeWhenStuck(shard: number, delivery: TailDelivery, messages: ConsumerMessages): Promise<void> {
    const seen = delivery.position;
    const counts = await this.subjectCountsOf(shard);
    const count = counts ? counts[this.subject(shard)] ?? 0 : UNKNOWN_COUNT;
    const prior = this.tailChecks.get(delivery);
    const check: TailCheck = { position: seen, count, caughtUpAt: prior?.position === seen ? prior.caughtUpAt : null };
    this.tailChecks.set(delivery, check);
    if (prior?.position !== seen || !delivery.active) return;
    if (count !== UNKNOWN_COUNT && check.caughtUpAt === count) return;
    const last = await this.last(shard).catch(() => 0);
    if (delivery.position !== seen) return;
    if (last > seen) await messages.close().catch(() => undefined);
    else check.caughtUpAt = count;
  }

  private subjectCountsOf(shard: number): Promise<Record<string, number> | null> {
    const k = shard % STREAMS;
    const held = this.subjectCounts.get(k);
    if (held && performance.now() - held.at < TAIL_PROGRESS_CHECK_MS / 2) return held.counts;
    const counts = this.jsm.streams.info(this.stream(shard), { subjects_filter: '>' }).then(
      (info) => info.state.subjects ?? {},
      () => null,
    );
    this.subjectCounts.set(k, { at: performance.now(), counts });
    return counts;
  }

  private async ensureStream(k: number, replicas: number): Promise<void> {
    const subjects: string[] = [];
    for (let shard = k; shard < SHARD_COUNT; shard += STREAMS) subjects.push(this.subject(shard));
    const config: Partial<StreamConfig> & { name: string } = {
      name: streamName(this.cluster, k),
      subjects,
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      num_replicas: replicas,
      discard: DiscardPolicy.Old,
      max_msgs: -1,
      max_bytes: -1,
      max_age: 0,
      max_msg_size: MAX_MESSAGE_BYTES,
      duplicate_window: nanos(120_000),
      allow_direct: false,
      deny_delete: false,
      deny_purge: false,
    };
    try {
      await this.jsm.streams.info(config.name);
    } catch (err) {
      if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound)) throw this.failure(k, err, false);
      try {
        await this.jsm.streams.add(config);
      } catch (addErr) {
        // Another node created it between the lookup and the add. Adds racing from several nodes
        // also fail as "stream not found" (seen with nats-server 2.9 while a cluster started): the
        // stream may exist all the same, so look again before giving up.
        if (addErr instanceof JetStreamApiError && /already in use/.test(addErr.message)) return;
        await new Promise((r) => setTimeout(r, 200));
        const exists = await this.jsm.streams.info(config.name).then(
          () => true,
          () => false,
        );
        if (!exists) throw this.failure(k, addErr, false);
      }
    }
  }

  /** `request` (idempotent), retried while the log is unavailable, its failures typed. */
  private retried<T>(shard: number, request: () => Promise<T>): Promise<T> {
    return retryUnavailable(this.unavailableBudgetMs, async () => {
      try {
        return await request();
      } catch (err) {
        throw this.failure(shard, err, false);
      }
    });
  }

  /** The entry right after `after`: one get from the stream leader. */
  private async readOne(shard: number, after: number): Promise<ShardLogEntry[]> {
    // The server's message get takes `next_by_subj` (2.9+); the client only types it for direct gets.
    const query = { seq: after + 1, next_by_subj: this.subject(shard) } as unknown as MsgRequest;
    const m = await this.jsm.streams.getMessage(this.stream(shard), query);
    return m ? [entryOf(m.seq, m.header, m.data)] : [];
  }

  /**
   * Up to `limit` entries through a short-lived consumer: its creation says how many entries
   * follow, then one pull request fetches exactly those (no waiting for entries that will not come).
   */
  private async readBatch(shard: number, after: number, limit: number): Promise<ShardLogEntry[]> {
    const stream = this.stream(shard);
    const info = await this.jsm.consumers.add(stream, {
      filter_subject: this.subject(shard),
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: after + 1,
      ack_policy: AckPolicy.None,
      mem_storage: true,
      num_replicas: 1,
      inactive_threshold: nanos(10_000),
    });
    try {
      const wanted = Math.min(limit, info.num_pending);
      if (wanted === 0) return [];
      const inbox = createInbox();
      const sub = this.nc.subscribe(inbox, { max: wanted, timeout: this.timeoutMs });
      this.nc.publish(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${info.name}`, JSON.stringify({ batch: wanted, expires: nanos(this.timeoutMs) }), { reply: inbox });
      const entries: ShardLogEntry[] = [];
      for await (const m of sub) {
        if (isStatus(m)) break;
        entries.push(entryOf(streamSeqOf(m), m.headers, m.data));
      }
      if (entries.length === 0) throw new natsErrors.TimeoutError();
      return entries;
    } finally {
      void this.jsm.consumers.delete(stream, info.name).catch(() => undefined);
    }
  }

  /** The typed error for a failed request: unavailable when nothing can have been written. */
  private failure(shard: number, err: unknown, appending: boolean): unknown {
    if (err instanceof ShardLogFenced || err instanceof ShardLogUnavailable || err instanceof ShardLogUnknownOutcome) return err;
    // "jetstream is not enabled" (no responders during a re-election) and API 503s refuse the call.
    if (err instanceof JetStreamApiError && err.status === 503) return new ShardLogUnavailable(shard, { cause: err });
    if (err instanceof Error && /jetstream is not enabled/i.test(err.message)) return new ShardLogUnavailable(shard, { cause: err });
    if (err instanceof natsErrors.RequestError && err.isNoResponders()) return new ShardLogUnavailable(shard, { cause: err });
    const lost = err instanceof natsErrors.TimeoutError || err instanceof natsErrors.ConnectionError || err instanceof natsErrors.ClosedConnectionError || err instanceof natsErrors.DrainingConnectionError;
    if (lost) return appending ? new ShardLogUnknownOutcome(shard, { cause: err }) : new ShardLogUnavailable(shard, { cause: err });
    return err;
  }

  private stream(shard: number): string {
    return streamName(this.cluster, shardIndex(shard) % STREAMS);
  }

  private subject(shard: number): string {
    return `rh.${this.cluster.replace(/[^A-Za-z0-9_-]/g, '_')}.wal.${shardIndex(shard)}`;
  }
}

function streamName(cluster: string, k: number): string {
  return `RH_${cluster.toUpperCase().replace(/[^A-Z0-9_-]/g, '_')}_WAL_${k}`;
}

function shardIndex(shard: number): number {
  if (!Number.isInteger(shard) || shard < 0 || shard >= SHARD_COUNT) throw new RangeError(`shard ${shard} out of range`);
  return shard;
}

function entryOf(seq: number, hdrs: MsgHdrs | undefined, data: Uint8Array): ShardLogEntry {
  return { seq, prev: Number(hdrs?.get(PREV_HEADER) ?? 0), id: hdrs?.get(MSG_ID_HEADER) ?? '', record: data };
}

/** A pull request's status reply (no messages, timeout), as opposed to a stored message. */
function isStatus(m: Msg): boolean {
  return m.headers !== undefined && m.headers.code !== 0 && m.data.length === 0 && !m.headers.has(MSG_ID_HEADER);
}

/** The stream sequence from a delivered message's reply subject ($JS.ACK.[domain.hash.]stream.consumer.delivered.sseq...). */
function streamSeqOf(m: Msg): number {
  const tokens = (m.reply ?? '').split('.');
  return Number(tokens.length === 9 ? tokens[5] : tokens[7]);
}
