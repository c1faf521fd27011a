/**
 * The payload of one shard log entry. An owner's record carries the write sets of every batch
 * that touched the shard since its previous append (group commit at the log level), in commit
 * order; an epoch record (no write sets) is what a new owner appends to fence the old one.
 *
 * Layout (big-endian): [version: u8 = 1][epoch: u32][write-set count: u32] then per write set
 * [length: u32][bytes]. Write sets are opaque here: storage encodes and applies them.
 */
const VERSION = 1;

export interface LogRecord {
  epoch: number;
  writeSets: Uint8Array[];
}

export function encodeLogRecord(record: LogRecord): Uint8Array {
  let size = 9;
  for (const ws of record.writeSets) size += 4 + ws.length;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  view.setUint8(0, VERSION);
  view.setUint32(1, record.epoch);
  view.setUint32(5, record.writeSets.length);
  let at = 9;
  for (const ws of record.writeSets) {
    view.setUint32(at, ws.length);
    out.set(ws, (at += 4));
    at += ws.length;
  }
  return out;
}

export function decodeLogRecord(bytes: Uint8Array): LogRecord {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fail = (): never => {
    throw new Error('malformed shard log record');
  };
  if (bytes.length < 9 || view.getUint8(0) !== VERSION) fail();
  const epoch = view.getUint32(1);
  const count = view.getUint32(5);
  let at = 9;
  const writeSets: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    if (at + 4 > bytes.length) fail();
    const length = view.getUint32(at);
    at += 4;
    if (at + length > bytes.length) fail();
    writeSets.push(bytes.subarray(at, at + length));
    at += length;
  }
  if (at !== bytes.length) fail();
  return { epoch, writeSets };
}
