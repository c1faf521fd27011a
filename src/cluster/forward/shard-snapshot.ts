import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { Readable, pipeline } from 'node:stream';
import type { Transaction } from 'lmdb';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import { log } from '../../log.js';
import type { Storage } from '../../storage/database.js';
import { readReplicaPosition } from '../../storage/replica-position.js';
import { shardFileChunks } from '../../storage/shard-stream.js';

/** Where a peer asks this node for its whole copy of a shard: `GET /shard-snapshot/<shard>`. */
export const SNAPSHOT_PATH = '/shard-snapshot/';
/** The answer's header: the shard log sequence the copy reflects. */
export const SNAPSHOT_SEQ_HEADER = 'x-repohost-log-seq';

/**
 * How long a source looks for a snapshot of its copy that is at a log position. A follower's
 * always is (it applies entries and their position in one transaction); an owner's is not while
 * a commit waits for its append, which under a steady load is a few milliseconds at a time.
 */
const POSITION_WAIT_MS = 3000;

export function isSnapshotRequest(req: Http2ServerRequest): boolean {
  return req.method === 'GET' && req.url.startsWith(SNAPSHOT_PATH);
}

/**
 * Streams this node's copy of a shard in the shard file format (storage/shard-stream.ts): every
 * key and value of the shard's ranges in `meta`, `objects` and `chunks`, read in ONE read
 * transaction, whose log position (`[s, 'log']`) is among the records and in SNAPSHOT_SEQ_HEADER.
 * The stream is pulled as the peer reads (HTTP/2 flow control), a piece of about 1 MiB at a time.
 * 503 when this copy is not at a log position (being imported, divergent, or an owner whose
 * commits wait for the log) or holds nothing.
 */
export function serveShardSnapshot(storage: Storage, req: Http2ServerRequest, res: Http2ServerResponse): void {
  const text = req.url.slice(SNAPSHOT_PATH.length);
  const shard = Number(text);
  if (!/^\d+$/.test(text) || shard >= SHARD_COUNT) {
    res.writeHead(404).end();
    return;
  }
  void atLogPosition(storage, shard).then((snapshot) => {
    if (!snapshot) {
      res.writeHead(503).end();
      return;
    }
    if (res.stream.destroyed) {
      snapshot.txn.done();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', [SNAPSHOT_SEQ_HEADER]: String(snapshot.seq) });
    const started = Date.now();
    const body = Readable.from(shardFileChunks(storage, shard, snapshot.txn), { objectMode: false });
    pipeline(body, res, (err) => {
      snapshot.txn.done();
      if (err) log.warn('a shard copy was not sent whole', { shard, seq: snapshot.seq, err });
      else log.info('shard copy sent', { shard, seq: snapshot.seq, ms: Date.now() - started });
    });
  });
}

/** A read transaction in which the shard's copy is at a log position, or null after POSITION_WAIT_MS. */
async function atLogPosition(storage: Storage, shard: number): Promise<{ txn: Transaction; seq: number } | null> {
  const deadline = Date.now() + POSITION_WAIT_MS;
  for (;;) {
    const txn = storage.root.useReadTransaction();
    const position = readReplicaPosition(storage, shard, txn);
    if (!position.dirty && position.seq > 0) return { txn, seq: position.seq };
    txn.done();
    // A clean copy at no position holds nothing: no use waiting.
    if (!position.dirty || Date.now() > deadline) return null;
    await new Promise((r) => setTimeout(r, 20));
  }
}
