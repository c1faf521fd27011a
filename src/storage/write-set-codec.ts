import { repohost } from '../protocol/generated/write-set.js';
import type { WriteDb, WriteOp, WriteSet } from './write-set.js';

/**
 * A write set's bytes: the protobuf `WriteSet` of src/protocol/write-set.proto. Deterministic (the
 * same write set always encodes to the same bytes) and lossless for keys and values, which are the
 * bytes LMDB stores.
 */
const { WriteSet: WriteSetMsg, WriteOp: WriteOpMsg } = repohost.storage;
const { Db, Kind } = WriteOpMsg;

const DBS: Record<WriteDb, repohost.storage.WriteOp.Db> = { meta: Db.META, objects: Db.OBJECTS, chunks: Db.CHUNKS };
const DB_NAMES: readonly WriteDb[] = ['meta', 'objects', 'chunks'];
const EMPTY = new Uint8Array(0);
const KINDS: Record<WriteOp['kind'], repohost.storage.WriteOp.Kind> = { put: Kind.PUT, del: Kind.DEL, delRange: Kind.DEL_RANGE };

export function encodeWriteSet(set: WriteSet): Uint8Array {
  return WriteSetMsg.encode({
    shard: set.shard,
    epoch: set.epoch,
    batchId: set.batchId,
    ops: set.ops.map((op) => ({ db: DBS[op.db], kind: KINDS[op.kind], key: op.key, value: op.value ?? EMPTY, end: op.end ?? EMPTY })),
  }).finish();
}

/** The write set `bytes` encode; keys and values are views into `bytes`. Throws on bytes that are not one. */
export function decodeWriteSet(bytes: Uint8Array): WriteSet {
  const msg = WriteSetMsg.decode(bytes);
  const ops = msg.ops.map((op): WriteOp => {
    const db = DB_NAMES[op.db];
    if (!db) throw new Error(`write set: unknown database ${op.db}`);
    if (op.kind === Kind.PUT) return { db, kind: 'put', key: op.key, value: op.value };
    if (op.kind === Kind.DEL) return { db, kind: 'del', key: op.key };
    if (op.kind === Kind.DEL_RANGE) return { db, kind: 'delRange', key: op.key, end: op.end };
    throw new Error(`write set: unknown op ${String(op.kind)}`);
  });
  return { shard: msg.shard, epoch: msg.epoch, batchId: msg.batchId, ops };
}
