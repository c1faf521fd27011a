import type { ShardLog, ShardLogEntry, ShardLogTail } from '../shard-log.js';

/** Separates a record's id from its piece's place: `<id>~<index>/<count>`. Record ids never contain it. */
const PIECE_MARK = '~';

interface PieceId {
  id: string;
  index: number;
  count: number;
}

function parsePiece(entryId: string): PieceId | null {
  const at = entryId.lastIndexOf(PIECE_MARK);
  if (at < 0) return null;
  const match = /^(\d+)\/(\d+)$/.exec(entryId.slice(at + 1));
  if (!match) return null;
  const index = Number(match[1]);
  const count = Number(match[2]);
  return count >= 2 && index < count ? { id: entryId.slice(0, at), index, count } : null;
}

/**
 * Joins pieces back into records, one entry at a time, in log order. A series that another entry
 * interrupts (its writer was fenced or died between two pieces) is dropped: it never acknowledged
 * that record.
 */
class PieceAssembler {
  private held: { id: string; count: number; prev: number; lastSeq: number; parts: Uint8Array[] } | null = null;

  /** The whole entry `entry` is or completes, else null. */
  take(entry: ShardLogEntry): ShardLogEntry | null {
    const piece = parsePiece(entry.id);
    if (!piece) {
      this.held = null;
      return entry;
    }
    const held = this.held;
    if (piece.index === 0) {
      this.held = { id: piece.id, count: piece.count, prev: entry.prev, lastSeq: entry.seq, parts: [entry.record] };
    } else if (held && held.id === piece.id && held.count === piece.count && held.parts.length === piece.index && entry.prev === held.lastSeq) {
      held.parts.push(entry.record);
      held.lastSeq = entry.seq;
    } else {
      this.held = null;
      return null;
    }
    const series = this.held!;
    if (series.parts.length < series.count) return null;
    this.held = null;
    return { seq: entry.seq, prev: series.prev, id: series.id, record: Buffer.concat(series.parts) };
  }
}

/**
 * A shard log whose records may be larger than one entry of its engine takes (etcd refuses a
 * request above 1.5 MiB; a nats-server a message above its `max_payload`): a larger record is
 * appended as pieces, one after the other, each conditional on the one before, and `read` and
 * `tail` hand it out only once all its pieces are read, as one entry (the last piece's sequence,
 * the first piece's `prev`, the record's id). The owner acknowledges a record only after its
 * last piece, and every position kept (applied, trimmed, seeded) is a whole record's sequence, so
 * readers start at a record's boundary. Smaller records are the engine's entries unchanged.
 */
export class PieceShardLog implements ShardLog {
  constructor(
    private readonly engine: ShardLog,
    /** The largest entry the engine takes. */
    private readonly maxEntryBytes: number,
  ) {}

  /**
   * A retry with the same id (after an unknown outcome) finds each piece that landed through the
   * engine's own rule, and goes on from there.
   */
  async append(shard: number, expectedLast: number, id: string, record: Uint8Array): Promise<number> {
    const size = this.maxEntryBytes;
    if (record.length <= size) return this.engine.append(shard, expectedLast, id, record);
    const count = Math.ceil(record.length / size);
    let last = expectedLast;
    for (let i = 0; i < count; i++) last = await this.engine.append(shard, last, `${id}${PIECE_MARK}${i}/${count}`, record.subarray(i * size, (i + 1) * size));
    return last;
  }

  last(shard: number): Promise<number> {
    return this.engine.last(shard);
  }

  /** Up to `limit` whole records; a series still being appended at the log's end is left for the next read. */
  async read(shard: number, after: number, limit: number): Promise<ShardLogEntry[]> {
    const pieces = new PieceAssembler();
    const out: ShardLogEntry[] = [];
    for (let cursor = after; ; ) {
      const batch = Math.max(limit - out.length, 16);
      const entries = await this.engine.read(shard, cursor, batch);
      for (const entry of entries) {
        const whole = pieces.take(entry);
        if (whole) out.push(whole);
        if (out.length === limit) return out;
      }
      if (entries.length < batch) return out;
      cursor = entries[entries.length - 1]!.seq;
    }
  }

  tail(shard: number, after: number, onEntries: (entries: ShardLogEntry[]) => Promise<void>): ShardLogTail {
    const pieces = new PieceAssembler();
    return this.engine.tail(shard, after, (entries) => {
      const whole: ShardLogEntry[] = [];
      for (const entry of entries) {
        const record = pieces.take(entry);
        if (record) whole.push(record);
      }
      return whole.length > 0 ? onEntries(whole) : Promise.resolve();
    });
  }

  trim(shard: number, upTo: number): Promise<void> {
    return this.engine.trim(shard, upTo);
  }

  close(): Promise<void> {
    return this.engine.close();
  }
}
