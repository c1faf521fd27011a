import { createHash, type Hash } from 'node:crypto';
import { closeSync, fstatSync, fsyncSync, openSync, readSync, renameSync, writeSync } from 'node:fs';
import type { Database, Key } from 'lmdb';
import { invalid } from '../errors.js';
import { SHARD_COUNT } from '../actors/shard-map.js';
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
 * truncated file, or a `kill -9` during the import, writes nothing.
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

/** Buffered writes to a file, hashed as they go. */
class HashedWriter {
  private readonly buffer = Buffer.allocUnsafe(IO_BUFFER);
  private fill = 0;
  readonly hash: Hash = createHash('sha256');
  bytes = 0;
  constructor(private readonly fd: number) {}

  write(bytes: Uint8Array, hashed = true): void {
    if (hashed) this.hash.update(bytes);
    this.bytes += bytes.length;
    if (this.fill + bytes.length > this.buffer.length) this.flush();
    if (bytes.length > this.buffer.length) writeSync(this.fd, bytes);
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
    if (this.fill > 0) writeSync(this.fd, this.buffer, 0, this.fill);
    this.fill = 0;
  }
}

/**
 * Writes the shard's entries to `file` (through a temporary file renamed at the end, so a file
 * of that name is always whole). Returns the number of records and the file's size.
 */
export function exportShard(storage: Storage, shard: ShardName, file: string): { records: number; bytes: number } {
  const temp = `${file}.partial`;
  const fd = openSync(temp, 'w', 0o600);
  const txn = storage.root.useReadTransaction();
  let records = 0;
  let out: HashedWriter;
  try {
    out = new HashedWriter(fd);
    out.write(MAGIC);
    const header = Buffer.from(JSON.stringify({ format: FORMAT, layout: LAYOUT_VERSION, shard } satisfies Header));
    out.u32(header.length);
    out.write(header);
    for (const [tag, { db, range }] of parts(storage, shard)) {
      for (const { key, value } of db.getRange({ ...range, transaction: txn })) {
        const encoded = Buffer.from(JSON.stringify(key));
        out.u8(tag);
        out.u32(encoded.length);
        out.write(encoded);
        out.u32(value.length);
        out.write(value);
        records++;
      }
    }
    out.u8(END);
    const count = Buffer.allocUnsafe(8);
    count.writeBigUInt64BE(BigInt(records));
    out.write(count);
    out.write(out.hash.digest(), false);
    out.flush();
    fsyncSync(fd);
  } finally {
    txn.done();
    closeSync(fd);
  }
  renameSync(temp, file);
  return { records, bytes: out.bytes };
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

/**
 * Removes everything the shard holds in this data directory, in the caller's write transaction:
 * what an import with `replace` overwrites, and what a cluster node drops to rebuild its copy
 * from the shard's log.
 */
export function clearShard(storage: Storage, shard: ShardName): void {
  for (const { name, range } of shardRanges(shard)) {
    const db: Database<unknown, Key> = storage[name];
    // Keys are collected first: a range is not iterated while it is being deleted.
    for (const key of [...db.getKeys(range)]) db.removeSync(key);
  }
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
      for (;;) {
        const tag = input.read(1)[0]!;
        if (tag === END) break;
        const part = dbs.get(tag);
        if (!part) throw invalid('the shard file is damaged');
        const key = parseKey(input.read(input.read(4).readUInt32BE()));
        const value = Buffer.from(input.read(input.read(4).readUInt32BE()));
        if (!part.owns(key)) throw invalid(`the shard file holds a key outside shard ${header.shard}`);
        part.db.putSync(key as Key, value);
        records++;
      }
      const count = Number(input.read(8).readBigUInt64BE());
      const expected = input.hash.digest();
      if (!input.read(DIGEST_BYTES, false).equals(expected) || count !== records || !input.atEnd()) throw invalid('the shard file is damaged (checksum)');
      return { shard: header.shard, records };
    });
  } finally {
    closeSync(fd);
  }
}
