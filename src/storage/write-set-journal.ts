import { openSync, readdirSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import { decodeWriteSet, encodeWriteSet } from './write-set-codec.js';
import type { WriteSet, WriteSink } from './write-set.js';

/**
 * Every shard write set a process commits, appended to files in a directory, one per thread: how
 * tests see the write sets of a real server (REPOHOST_WRITE_SET_JOURNAL, server-storage.ts). A
 * frame is the write set's length (4 bytes), its commit order (8 bytes) and its bytes; global
 * writes are not kept. Each append is a synchronous write, so a frame is whole once it returns.
 */
export function journalSink(dir: string): WriteSink {
  let fd: number | null = null;
  let batch = 0;
  return (writes) => {
    if (writes.shards.length === 0) return;
    fd ??= openSync(join(dir, `${process.pid}-${threadId}.journal`), 'a');
    batch++;
    for (const { shard, ops } of writes.shards) {
      const bytes = encodeWriteSet({ shard, epoch: 0, batchId: `${process.pid}-${threadId}-${batch}`, ops });
      const head = Buffer.alloc(12);
      head.writeUInt32BE(bytes.length, 0);
      head.writeBigUInt64BE(writes.order, 4);
      writeSync(fd, Buffer.concat([head, bytes]));
    }
  };
}

export interface JournalEntry {
  order: bigint;
  set: WriteSet;
}

/** Every write set of the journal in `dir`, in commit order (a shard's sets in the order they committed). */
export function readJournal(dir: string): JournalEntry[] {
  const entries: JournalEntry[] = [];
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.journal')) continue;
    const bytes = readFileSync(join(dir, name));
    for (let at = 0; at < bytes.length; ) {
      const length = bytes.readUInt32BE(at);
      entries.push({ order: bytes.readBigUInt64BE(at + 4), set: decodeWriteSet(bytes.subarray(at + 12, at + 12 + length)) });
      at += 12 + length;
    }
  }
  return entries.sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
}
