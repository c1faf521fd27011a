import { createWriteStream, mkdirSync, rmSync, statSync } from 'node:fs';
import { constants, type IncomingHttpHeaders } from 'node:http2';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { log } from '../../log.js';
import type { Storage } from '../../storage/database.js';
import { importShardCopy } from '../../storage/replica-position.js';
import { PeerSessions } from '../forward/peer-sessions.js';
import { SNAPSHOT_PATH } from '../forward/shard-snapshot.js';
import type { NodeInfo, PlacementView } from '../placement.js';

/**
 * Brings a copy of a shard that the log can no longer bring up (the log was trimmed past it: a
 * new follower, a node back after a long absence, a divergent copy dropped) to a peer's state:
 * it asks the shard's other copies in the placement, followers first (their copies are always
 * at a log position; an owner's is not while a commit waits for its append), then the other live
 * nodes, for the whole shard
 * (shard-snapshot.ts), writes the stream to a file in the data directory as it arrives (HTTP/2
 * flow control holds the sender back), then imports it in bounded transactions under the
 * shard's importing marker (replica-position.ts). The caller tails the log from the sequence the
 * copy reflects.
 */
export class ShardSeeder {
  /** Its own sessions: a whole shard on the forwarding sessions would hold forwarded requests up behind it. */
  private readonly peers: PeerSessions;
  private readonly dir: string;
  /** Seeds asked for per shard so far. */
  private readonly attempts = new Map<number, number>();

  constructor(
    private readonly storage: Storage,
    private readonly view: PlacementView,
    dataDir: string,
    /** A transfer silent this long is abandoned (and a peer's session unanswered this long is dropped). */
    private readonly idleMs: number,
  ) {
    this.peers = new PeerSessions(idleMs);
    // Files of transfers a crash cut short are worth nothing.
    this.dir = join(dataDir, 'shard-copies');
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true });
  }

  /** Replaces the local copy of `shard` with a peer's; resolves to the log sequence it reflects. */
  async seed(shard: number): Promise<number> {
    const placement = this.view.shard(shard);
    const me = this.view.localNodeId;
    const nodes = new Map(this.view.nodes().map((n) => [n.id, n]));
    // The copies placed first; then any other live node, whose copy (a previous owner's or
    // follower's) serves as well if it is at a log position (a node holding none answers 503).
    const placed = [...new Set([...(placement ? [...placement.followers, placement.owner] : []), ...nodes.keys()])].filter((id) => id !== me && nodes.has(id));
    // Each new attempt for a shard starts at the next copy: one whose copy is itself behind the log
    // (its tail stalled) must not be asked for ever.
    const attempt = this.attempts.get(shard) ?? 0;
    this.attempts.set(shard, attempt + 1);
    const first = placed.length ? attempt % placed.length : 0;
    const sources = [...placed.slice(first), ...placed.slice(0, first)];
    const failures: string[] = [];
    for (const id of sources) {
      try {
        return await this.copyFrom(nodes.get(id)!, shard);
      } catch (err) {
        failures.push(`${id}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    throw new Error(`shard ${shard}: no copy could be taken from a peer (${failures.join('; ') || 'none placed'})`);
  }

  close(): void {
    this.peers.close();
  }

  private async copyFrom(node: NodeInfo, shard: number): Promise<number> {
    const started = Date.now();
    const stream = this.peers.get(node.internalUrl, `${SNAPSHOT_PATH}${shard}`);
    stream.setTimeout(this.idleMs, () => stream.close(constants.NGHTTP2_CANCEL));
    const headers = await new Promise<IncomingHttpHeaders>((resolve, reject) => {
      stream.once('response', resolve);
      stream.once('error', reject);
      stream.once('close', () => reject(new Error(`stream closed before an answer (${stream.rstCode})`)));
    });
    const status = Number(headers[constants.HTTP2_HEADER_STATUS]);
    if (status !== 200) {
      stream.close(constants.NGHTTP2_CANCEL);
      throw new Error(`answered ${status}`);
    }
    const file = join(this.dir, `${shard}.shard`);
    try {
      await pipeline(stream, createWriteStream(file, { mode: 0o600 }));
      const bytes = statSync(file).size;
      const received = Date.now();
      const copy = await importShardCopy(this.storage, shard, file);
      const done = Date.now();
      log.info('shard copied from a peer', { shard, from: node.id, seq: copy.seq, records: copy.records, bytes, transfer_ms: received - started, import_ms: done - received });
      return copy.seq;
    } finally {
      rmSync(file, { force: true });
    }
  }
}
