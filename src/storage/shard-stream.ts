import { createHash, type Hash } from 'node:crypto';
import { closeSync, fstatSync, fsyncSync, openSync, readSync, renameSync, writeSync } from 'node:fs';
import type { Database, Key, Transaction } from 'lmdb';
import { invalid } from '../errors.js';
import { SHARD_COUNT } from '../actors/shard-map.js';
import { NESTABLE_COMMIT_THEN_SYNC } from './commit-flags.js';
import type { Storage } from './database.js';
import { K, LAYOUT_VERSION, Ranges, type KeyRange } from './keys.js';

/**
 * One shard's state as a file, and back: what moves a shard between data directories (and, in a
 * cluster, between nodes). `global` names the org-level data every node needs (orgs, slugs,
 * signing keys, webhook targets, and the records that are not per shard yet: keys.ts).
 *
 * The file: the 8 bytes `RHSHARD\n`; a length-prefixed JSON header `{format, layout, shard}`;
 * then one record per entry, `[db: u8 (1 meta, 2 objects, 3 chunks)][key length: u32][key]
 * [value length: u32][value]`, the key as the JSON of its tuple and the value as the bytes LMDB
 * holds (records are not decoded and re-encoded); then `[0: u8][record count: u64]` and the
 * SHA-256 of every byte before it. Lengths are big-endian.
 *
 * An export reads one snapshot. An import is one write transaction: it checks the checksum, the
 * record count and that every key belongs to the named shard before it commits, so a corrupt or
 * truncated file, or a `kill -9` during the import, writes nothing. A node seeding its copy of a
 * shard from a peer imports in bounded steps instead, under a marker (`importShardSteps`).
 */
const MAGIC = Buffer.from('RHSHARD\n', 'latin1');
const FORMAT = 1;
const END = 0;
const DIGEST_BYTES = 32;
const IO_BUFFER = 1024 * 1024;

export type ShardName = number | 'global';

interface Header {
  format: number;
  layout: number;
  shard: ShardName;
}

/** A database read and written as stored bytes (keys still tuples). */
type RawDb = Database<Buffer, Key>;

interface Part {
  db: RawDb;
  range: KeyRange;
  /** Whether a key belongs to the stream's shard. */
  owns: (key: unknown[]) => boolean;
}

/** The databases a shard keeps data in, in record tag order (tag = index + 1). */
const DATABASES = ['meta', 'objects', 'chunks'] as const;

/** What the shard owns: a range of each database it keeps data in. */
function shardRanges(shard: ShardName): Array<{ name: (typeof DATABASES)[number]; range: KeyRange }> {
  if (shard === 'global') return [{ name: 'meta', range: Ranges.global() }];
  return DATABASES.map((name) => ({ name, range: Ranges.shard(shard) }));
}

/** The databases a stream carries, by their record tag, each with the range the shard owns in it. */
function parts(storage: Storage, shard: ShardName): Map<number, Part> {
  const owns = shard === 'global' ? (key: unknown[]): boolean => typeof key[0] === 'string' : (key: unknown[]): boolean => key[0] === shard;
  return new Map(
    shardRanges(shard).map(({ name, range }) => [DATABASES.indexOf(name) + 1, { db: storage.root.openDB<Buffer, Key>({ name, encoding: 'binary' }), range, owns }]),
  );
}

export function parseShardName(text: string | undefined): ShardName {
  if (text === 'global') return 'global';
  const n = Number(text);
  if (text === undefined || !/^\d+$/.test(text) || n >= SHARD_COUNT) throw invalid(`a shard is a number from 0 to ${SHARD_COUNT - 1}, or "global"`);
  return n;
}

/** Bytes gathered into pieces of about IO_BUFFER, hashed as they go. */
class HashedWriter {
  private buffer = Buffer.allocUnsafe(IO_BUFFER);
  private fill = 0;
  /** Whole pieces not taken yet. */
  private readonly ready: Buffer[] = [];
  readonly hash: Hash = createHash('sha256');
  bytes = 0;

  write(bytes: Uint8Array, hashed = true): void {
    if (hashed) this.hash.update(bytes);
    this.bytes += bytes.length;
    if (this.fill + bytes.length > this.buffer.length) this.flush();
    if (bytes.length > this.buffer.length) this.ready.push(Buffer.from(bytes));
    else {
      this.buffer.set(bytes, this.fill);
      this.fill += bytes.length;
    }
  }

  u8(n: number): void {
    this.write(Buffer.from([n]));
  }

  u32(n: number): void {
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32BE(n);
    this.write(b);
  }

  flush(): void {
    if (this.fill > 0) {
      this.ready.push(this.buffer.subarray(0, this.fill));
      this.buffer = Buffer.allocUnsafe(IO_BUFFER);
    }
    this.fill = 0;
  }

  /** The pieces filled so far. */
  take(): Buffer[] {
    return this.ready.splice(0);
  }
}

/**
 * The file of `shard` as read in `txn` (one snapshot; the caller ends it), in pieces of about
 * IO_BUFFER: what an export writes, and what a node streams to a peer that takes a copy of the
 * shard (src/cluster/forward/shard-snapshot.ts). Returns the number of records and bytes.
 */
export function* shardFileChunks(storage: Storage, shard: ShardName, txn: Transaction): Generator<Buffer, { records: number; bytes: number }> {
  const out = new HashedWriter();
  out.write(MAGIC);
  const header = Buffer.from(JSON.stringify({ format: FORMAT, layout: LAYOUT_VERSION, shard } satisfies Header));
  out.u32(header.length);
  out.write(header);
  let records = 0;
  for (const [tag, { db, range }] of parts(storage, shard)) {
    for (const { key, value } of db.getRange({ ...range, transaction: txn })) {
      const encoded = Buffer.from(JSON.stringify(key));
      out.u8(tag);
      out.u32(encoded.length);
      out.write(encoded);
      out.u32(value.length);
      out.write(value);
      records++;
      yield* out.take();
    }
  }
  out.u8(END);
  const count = Buffer.allocUnsafe(8);
  count.writeBigUInt64BE(BigInt(records));
  out.write(count);
  out.write(out.hash.digest(), false);
  out.flush();
  yield* out.take();
  return { records, bytes: out.bytes };
}

/**
 * Writes the shard's entries to `file` (through a temporary file renamed at the end, so a file
 * of that name is always whole). Returns the number of records and the file's size.
 */
export function exportShard(storage: Storage, shard: ShardName, file: string): { records: number; bytes: number } {
  const temp = `${file}.partial`;
  const fd = openSync(temp, 'w', 0o600);
  const txn = storage.root.useReadTransaction();
  let written: { records: number; bytes: number };
  try {
    const chunks = shardFileChunks(storage, shard, txn);
    for (let next = chunks.next(); ; next = chunks.next()) {
      if (next.done) {
        written = next.value;
        break;
      }
      writeSync(fd, next.value);
    }
    fsyncSync(fd);
  } finally {
    txn.done();
    closeSync(fd);
  }
  renameSync(temp, file);
  return written;
}

/** Buffered reads from a file, hashed as they go; a read past the end is a truncated file. */
class HashedReader {
  private buffer = Buffer.alloc(0);
  private at = 0;
  private position = 0;
  private consumed = 0;
  private readonly size: number;
  readonly hash: Hash = createHash('sha256');
  constructor(private readonly fd: number) {
    this.size = fstatSync(fd).size;
  }

  read(n: number, hashed = true): Buffer {
    // A length past the end of the file (a cut file, or a damaged length) is never allocated.
    if (this.consumed + n > this.size) throw invalid('the shard file is truncated');
    this.consumed += n;
    if (this.buffer.length - this.at < n) {
      const rest = this.buffer.subarray(this.at);
      const next = Buffer.allocUnsafe(Math.max(IO_BUFFER, n));
      rest.copy(next);
      let fill = rest.length;
      while (fill < n) {
        const got = readSync(this.fd, next, fill, next.length - fill, this.position);
        if (got === 0) throw invalid('the shard file is truncated');
        this.position += got;
        fill += got;
      }
      this.buffer = next.subarray(0, fill);
      this.at = 0;
    }
    const bytes = this.buffer.subarray(this.at, this.at + n);
    this.at += n;
    if (hashed) this.hash.update(bytes);
    return bytes;
  }

  atEnd(): boolean {
    return this.consumed === this.size;
  }
}

function readHeader(input: HashedReader): Header {
  if (!input.read(MAGIC.length).equals(MAGIC)) throw invalid('not a shard file');
  const length = input.read(4).readUInt32BE();
  if (length > 4096) throw invalid('the shard file header is damaged');
  let header: Header;
  try {
    header = JSON.parse(input.read(length).toString('utf8')) as Header;
  } catch {
    throw invalid('the shard file header is damaged');
  }
  if (header.format !== FORMAT) throw invalid(`shard file format ${header.format} is not supported`);
  if (header.layout !== LAYOUT_VERSION) throw invalid(`the shard file has storage layout ${header.layout}, this build ${LAYOUT_VERSION}`);
  return { ...header, shard: parseShardName(String(header.shard)) };
}

/** A record's key: a tuple of strings and numbers. */
function parseKey(bytes: Buffer): unknown[] {
  let key: unknown;
  try {
    key = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw invalid('the shard file is damaged (a key)');
  }
  if (!Array.isArray(key) || key.length === 0 || !key.every((part) => typeof part === 'string' || typeof part === 'number')) throw invalid('the shard file is damaged (a key)');
  return key;
}

/** Whether the shard has anything in this data directory (a new one's layout record aside). */
function shardHasData(storage: Storage, shard: ShardName): boolean {
  const layoutKey = JSON.stringify(K.layoutVersion());
  for (const { db, range } of parts(storage, shard).values()) {
    for (const key of db.getKeys({ ...range, limit: 2 })) if (JSON.stringify(key) !== layoutKey) return true;
  }
  return false;
}

interface ShardRecord {
  db: RawDb;
  key: Key;
  value: Buffer;
}

/**
 * The records after a shard file's header, each checked to belong to `shard`; after the last one,
 * the record count and the checksum are checked (a damaged or cut file throws there, or before).
 */
function* readRecords(input: HashedReader, dbs: Map<number, Part>, shard: ShardName): Generator<ShardRecord> {
  let records = 0;
  for (;;) {
    const tag = input.read(1)[0]!;
    if (tag === END) break;
    const part = dbs.get(tag);
    if (!part) throw invalid('the shard file is damaged');
    const key = parseKey(input.read(input.read(4).readUInt32BE()));
    const value = Buffer.from(input.read(input.read(4).readUInt32BE()));
    if (!part.owns(key)) throw invalid(`the shard file holds a key outside shard ${shard}`);
    records++;
    yield { db: part.db, key: key as Key, value };
  }
  const count = Number(input.read(8).readBigUInt64BE());
  const expected = input.hash.digest();
  if (!input.read(DIGEST_BYTES, false).equals(expected) || count !== records || !input.atEnd()) throw invalid('the shard file is damaged (checksum)');
}

/**
 * Removes what the shard holds in this data directory, in the caller's write transaction: what an
 * import with `replace` overwrites, and what a cluster node drops to rebuild or re-copy its copy.
 * With `step`, at most `limit` keys and never `keep` (a long clear goes in bounded transactions,
 * under a marker that must outlive them); returns how many keys went.
 */
export function clearShard(storage: Storage, shard: ShardName, step?: { limit: number; keep: Key }): number {
  const keep = step ? JSON.stringify(step.keep) : null;
  let removed = 0;
  for (const { name, range } of shardRanges(shard)) {
    const db: Database<unknown, Key> = storage[name];
    // Keys are collected first: a range is not iterated while it is being deleted.
    const keys = [...db.getKeys(step ? { ...range, limit: step.limit - removed + 1 } : range)];
    for (const key of keys) {
      if (keep !== null && JSON.stringify(key) === keep) continue;
      db.removeSync(key);
      if (++removed === step?.limit) return removed;
    }
  }
  return removed;
}

/**
 * Writes a shard file into this data directory in one transaction. A shard that already has data
 * here is refused unless `replace`, which clears it first (in the same transaction).
 */
export function importShard(storage: Storage, file: string, options: { replace: boolean }): { shard: ShardName; records: number } {
  const fd = openSync(file, 'r');
  try {
    const input = new HashedReader(fd);
    const header = readHeader(input);
    const dbs = parts(storage, header.shard);
    return storage.root.transactionSync(() => {
      if (shardHasData(storage, header.shard)) {
        if (!options.replace) throw invalid(`shard ${header.shard} already has data here: import with --replace to overwrite it`);
        clearShard(storage, header.shard);
      }
      let records = 0;
      for (const { db, key, value } of readRecords(input, dbs, header.shard)) {
        db.putSync(key, value);
        records++;
      }
      return { shard: header.shard, records };
    }, NESTABLE_COMMIT_THEN_SYNC);
  } finally {
    closeSync(fd);
  }
}

/** What `importShardSteps` writes per transaction, in value bytes. */
const IMPORT_STEP_BYTES = 8 * 1024 * 1024;

/**
 * Writes the file of shard `shard` into this data directory in bounded transactions, one per step
 * (the caller may let other work run between steps); returns the number of records. Unlike
 * `importShard`, the steps committed stay if the file turns out damaged at its end: the caller
 * clears the shard first and marks it as not whole until this returned (replica-position.ts).
 */
export function* importShardSteps(storage: Storage, file: string, shard: number): Generator<void, number> {
  const fd = openSync(file, 'r');
  try {
    const input = new HashedReader(fd);
    const header = readHeader(input);
    if (header.shard !== shard) throw invalid(`the shard file holds shard ${header.shard}, not ${shard}`);
    let batch: ShardRecord[] = [];
    let bytes = 0;
    let records = 0;
    const commit = (): void => {
      const puts = batch;
      batch = [];
      bytes = 0;
      storage.root.transactionSync(() => {
        for (const { db, key, value } of puts) db.putSync(key, value);
      }, NESTABLE_COMMIT_THEN_SYNC);
    };
    for (const record of readRecords(input, parts(storage, shard), shard)) {
      batch.push(record);
      bytes += record.value.length + 64;
      records++;
      if (bytes >= IMPORT_STEP_BYTES) {
        commit();
        yield;
      }
    }
    commit();
    return records;
  } finally {
    closeSync(fd);
  }
}
