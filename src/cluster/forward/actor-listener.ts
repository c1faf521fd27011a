import { deserialize, serialize } from 'node:v8';
import type { Database, Key } from 'lmdb';
import { createServer, constants, type Http2Server, type ServerHttp2Session, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { shardOf } from '../../actors/shard-map.js';
import type { ActorRuntime } from '../../actors/runtime.js';
import type { ReadFence } from '../../http/read-fence.js';
import { log } from '../../log.js';
import { ACTOR_HEADER, ACTOR_PATH, COMMAND_HEADER, PROTOBUF, STALE_STATUS, encodeFailure } from './actor-wire.js';
import type { ForwardMetrics } from './forward-metrics.js';
import { HOP_HEADER, parseHop, staleRoute } from './hop.js';
import type { ShardOwners } from './shard-owners.js';
import { LIST_PATH, READ_PATH, V8_CLONE, readOwnKeys, readOwnLists, type ListRead } from './shard-gather.js';
import { isSnapshotRequest } from './shard-snapshot.js';

/**
 * Largest forwarded message read. Peers only send what their front end accepted, so this is a
 * guard against a broken peer, not a limit a client meets.
 */
const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

/**
 * The internal HTTP/2 listener (REPOHOST_NODE_INTERNAL_URL): peers post the protobuf
 * ActorRequest of a shard they believe this node owns; it runs on the local runtime and the
 * ActorReply goes back. A message for a shard this node does not own is refused as a stale route
 * (never forwarded again); one for an owned shard this node may not serve now gets 503. Peers
 * also post batches of keys of this node's shards to read (READ_PATH), and of lists to read
 * newest first (LIST_PATH, shard-gather.ts), and ask for a whole copy of a shard (`snapshots`,
 * shard-snapshot.ts).
 */
export class ActorListener {
  private readonly server: Http2Server;
  private readonly sessions = new Set<ServerHttp2Session>();

  constructor(
    private readonly runtime: ActorRuntime,
    private readonly meta: Database<unknown, Key>,
    private readonly owners: ShardOwners,
    private readonly metrics: ForwardMetrics,
    private readonly snapshots: (req: Http2ServerRequest, res: Http2ServerResponse) => void,
    private readonly fence: ReadFence,
  ) {
    this.server = createServer((req, res) => this.onRequest(req, res));
    this.server.on('session', (session: ServerHttp2Session) => {
      this.sessions.add(session);
      session.once('close', () => this.sessions.delete(session));
    });
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve((this.server.address() as { port: number }).port));
    });
  }

  /** Stops listening; peers' keep-alive sessions are closed once their streams are answered. */
  close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const session of this.sessions) session.close();
    return closed;
  }

  private onRequest(req: Http2ServerRequest, res: Http2ServerResponse): void {
    if (isSnapshotRequest(req)) {
      this.snapshots(req, res);
      return;
    }
    if ((req.url !== ACTOR_PATH && req.url !== READ_PATH && req.url !== LIST_PATH) || req.method !== 'POST') {
      res.writeHead(404).end();
      return;
    }
    const shard = parseHop(String(req.headers[HOP_HEADER] ?? ''));
    const parts: Buffer[] = [];
    let size = 0;
    req.on('data', (d: Buffer) => {
      size += d.length;
      if (size > MAX_MESSAGE_BYTES) req.destroy();
      else parts.push(d);
    });
    req.on('end', () => {
      if (req.url === READ_PATH || req.url === LIST_PATH) {
        void this.read(req.url, Buffer.concat(parts)).then(({ status, bytes }) => {
          res.writeHead(status, { [constants.HTTP2_HEADER_CONTENT_TYPE]: status === 200 ? V8_CLONE : PROTOBUF }).end(bytes);
        });
        return;
      }
      this.serve(shard, String(req.headers[ACTOR_HEADER] ?? ''), String(req.headers[COMMAND_HEADER] ?? ''), Buffer.concat(parts)).then(
        ({ status, bytes }) => res.writeHead(status, { [constants.HTTP2_HEADER_CONTENT_TYPE]: PROTOBUF }).end(bytes),
        (err: unknown) => {
          log.error('forwarded message failed', { err });
          res.writeHead(500).end();
        },
      );
    });
  }

  /**
   * A batch of keys or lists read from this node's LMDB, all of shards it owns and serves, or
   * refused whole; sent once the shards' logs hold what it read (read-fence.ts).
   */
  private async read(path: string, bytes: Buffer): Promise<{ status: number; bytes: Uint8Array }> {
    try {
      const request = deserialize(bytes) as unknown;
      const read = path === LIST_PATH ? readOwnLists(this.meta, this.owners, request as ListRead) : readOwnKeys(this.meta, this.owners, request as Key[]);
      if ('values' in read) {
        await this.fence.made(read.shards);
        return { status: 200, bytes: serialize(read.values) };
      }
      this.metrics.staleRefused('read');
      return { status: STALE_STATUS, bytes: encodeFailure(staleRoute(read.notOwned)) };
    } catch (err) {
      return { status: 503, bytes: encodeFailure(err) };
    }
  }

  /** Runs a forwarded ActorRequest of `actor` (its headers say which: actor-wire.ts). */
  private async serve(hop: number | null, actor: string, command: string, bytes: Buffer): Promise<{ status: number; bytes: Uint8Array }> {
    if (actor === '' || command === '') return { status: 400, bytes: new Uint8Array(0) };
    const shard = shardOf(actor);
    if (hop !== shard) return { status: 400, bytes: new Uint8Array(0) };
    if (!this.owners.owns(shard)) {
      this.metrics.staleRefused('actor');
      return { status: STALE_STATUS, bytes: encodeFailure(staleRoute(shard)) };
    }
    try {
      this.owners.home(shard); // throws when this node may not serve it now
      // The message runs as it arrived, and the worker's reply goes back as it left the worker.
      return { status: 200, bytes: (await this.runtime.dispatch(actor, command, bytes)).raw };
    } catch (err) {
      return { status: 200, bytes: encodeFailure(err) };
    }
  }
}
