import { asServiceError } from '../../errors.js';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { Pool } from 'undici';
import type { ForwardableRequest, RequestForwarding, RequestPlacement } from '../../http/forwarding.js';
import type { Reply } from '../../http/route.js';
import type { NodeInfo } from '../placement.js';
import { LruCache } from '../../storage/read/lru-cache.js';
import { getRepoResolvedElsewhere, repoIdByName } from '../../storage/repo-store.js';
import type { RecordReader } from '../../storage/read/record-cache.js';
import { orgShard, repoShard } from '../../storage/shards.js';
import type { ForwardMetrics } from './forward-metrics.js';
import { HOP_HEADER, NODE_HEADER, REPO_HEADER, STALE_REASON, ownerUnreachable, parseHop, staleRoute } from './hop.js';
import type { ShardOwners } from './shard-owners.js';
import { SMALL_BODY_BYTES, readWhole } from '../../http/write-body-reader.js';

const HERE: RequestPlacement = { here: true, repoId: null };

/** Response headers that describe the hop between the nodes, not the answer. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date', 'x-request-id', 'uwebsockets']);

/** Replies up to this size are read whole before they are sent on; larger ones stream through. */
const WHOLE_REPLY_BYTES = 64 * 1024;

/** Repository names an entry node remembers the ids of (org id + name → repository id). */
const REMEMBERED_NAMES = 16_384;

/**
 * Connections kept to each peer's public listener: one request in flight on each, so they bound
 * what a node can have in flight at a peer. 32 capped a 3-node cluster's writes at 32 ÷ a
 * write's latency (150–230/s with writes of ~100 ms, 200 clients queueing at the entry node).
 */
const CONNECTIONS_PER_PEER = 512;

/**
 * The front end's placement of a request that names an org (inventory in docs/design.md,
 * "Forwarding"). Outside the actor messages, the front end reads shard data itself: the org's
 * name index (every `{repo}` path, restricted tokens, repository lists, idempotency replays) and
 * the repository's records, objects and chunks (reads, content, diff, blobs, git). A node holds
 * that data only for the shards it owns, so such a request is served where those shards are:
 * - a node that does not own the org's shard proxies the request to that shard's owner;
 * - the org's owner resolves `{repo}`; if the repository's shard is elsewhere it proxies the
 *   request once more, to that shard's owner, with the id it resolved (the owner may not hold
 *   the org's name index);
 * - a node that receives a request marked for a shard it does not own answers 503 with
 *   Retry-After (a stale route), and never forwards a request for the same shard again.
 * Bodies stream through as they arrive: a blob upload or a git push is staged by the owner only.
 * The actor messages the serving node sends to other shards go through the ActorRouter.
 */
export class RequestForwarder implements RequestForwarding {
  private readonly pools = new Map<string, Pool>();
  /**
   * The ids that replies to this node's clients' requests resolved names to. A request to a
   * repository goes straight to its shard's owner (or is served here) instead of through the org's owner;
   * the owner checks the name against the repository's own record, and a 404 on a remembered
   * name is asked again through the org's owner (a renamed or deleted repository).
   */
  private readonly names = new LruCache<string>(REMEMBERED_NAMES, Infinity, () => 1);
  private readonly unsubscribe: () => void;

  constructor(
    private readonly owners: ShardOwners,
    private readonly records: RecordReader,
    private readonly metrics: ForwardMetrics,
  ) {
    this.unsubscribe = owners.view.onChange(() => this.dropDeparted());
  }

  /**
   * A peer whose lease expired leaves the view: its connections are destroyed, so the requests
   * still waiting on a stopped or cut-off node fail (503 to their clients) instead of hanging.
   */
  private dropDeparted(): void {
    const live = new Set(this.owners.view.nodes().map((n) => n.url));
    for (const [url, pool] of this.pools) {
      if (live.has(url)) continue;
      this.pools.delete(url);
      void pool.destroy();
    }
  }

  get nodeId(): string {
    return this.owners.localId;
  }

  place(req: ForwardableRequest): RequestPlacement {
    const { params } = req;
    if (params.org === undefined) return HERE;
    const org = orgShard(req.orgId);
    const hop = parseHop(req.hop);
    if (hop !== null) {
      if (!this.owners.owns(hop)) {
        this.metrics.staleRefused('request');
        throw staleRoute(hop);
      }
      this.owners.home(hop); // 503 when this node may not serve it now
      // Sent here for the repository's shard by the org's owner, with the id it resolved; a hop
      // to another shard without a matching id is not one (a client cannot steer name lookups).
      if (hop !== org) {
        if (req.hopRepo === '' || repoShard(req.hopRepo) !== hop) throw staleRoute(hop);
        return { here: true, repoId: req.hopRepo };
      }
    } else {
      const home = this.owners.home(org);
      if (!home.local) return this.byRememberedName(req, home.node, org) ?? this.proxy(req, home.node, org, null);
    }
    if (params.repo === undefined) return HERE;
    const repoId = repoIdByName(this.records, req.orgId, params.repo);
    // A name the org does not have is answered here: this node holds the org's name index.
    if (repoId === undefined) return HERE;
    const shard = repoShard(repoId);
    const home = this.owners.home(shard);
    return home.local ? HERE : this.proxy(req, home.node, shard, repoId);
  }

  /**
   * A client's request to a repository whose id this node learned: placed by its shard. A stale
   * name is asked again through the org's owner, which needs the body a second time (a
   * REPO_NOT_FOUND from the owner applied nothing): a streamed body is taken whole first when it
   * is declared small (the owner reads such a body whole too), a larger one goes through the org's
   * owner. Without this, every file write (apply-ops streams its body) took two hops.
   */
  private byRememberedName(req: ForwardableRequest, orgNode: NodeInfo, org: number): RequestPlacement | null {
    const name = req.params.repo;
    if (name === undefined || (req.bodyStream && (req.declared === 0 || req.declared > SMALL_BODY_BYTES))) return null;
    const key = nameKey(req.orgId, name);
    const repoId = this.names.get(key);
    if (repoId === undefined) return null;
    const shard = repoShard(repoId);
    const home = this.owners.home(shard);
    if (home.local) {
      if (getRepoResolvedElsewhere(this.records, req.orgId, name, repoId)) return { here: true, repoId };
      this.names.delete(key);
      return null;
    }
    const resendable: ForwardableRequest = req.bodyStream ? { ...req, body: readWhole(req.bodyStream), bodyStream: null } : req;
    const reply = this.send(resendable, home.node, shard, repoId).then((answer) => {
      if (!repoNotFound(answer)) return answer;
      this.names.delete(key);
      return this.send(resendable, orgNode, org, null);
    });
    return { here: false, reply };
  }

  private proxy(req: ForwardableRequest, node: NodeInfo, shard: number, repoId: string | null): RequestPlacement {
    return { here: false, reply: this.send(req, node, shard, repoId) };
  }

  private async send(req: ForwardableRequest, node: NodeInfo, shard: number, repoId: string | null): Promise<Reply> {
    const headers: Record<string, string> = { 'x-request-id': req.requestId, [HOP_HEADER]: String(shard) };
    for (const [name, value] of Object.entries(req.headers)) if (value !== '') headers[name] = value;
    if (repoId !== null) headers[REPO_HEADER] = repoId;
    const body = req.bodyStream ? Readable.from(req.bodyStream, { objectMode: false }) : req.body ? await req.body : null;
    const started = performance.now();
    let res;
    try {
      res = await this.pool(node.url).request({ method: req.method, path: req.rawQuery ? `${req.url}?${req.rawQuery}` : req.url, headers, body });
    } catch (err) {
      // The client's own body failing (too large, cut short) is the client's error, not the owner's.
      const own = asServiceError(err) ?? asServiceError((err as { cause?: unknown } | null)?.cause);
      if (own) throw own;
      this.metrics.observe('request', 'unreachable', 0);
      throw ownerUnreachable(node.id);
    }
    const replyHeaders: Record<string, string> = {};
    const fromClient = req.hop === '';
    const resolved = res.headers[REPO_HEADER];
    if (fromClient && typeof resolved === 'string' && req.params.repo !== undefined) this.names.set(nameKey(req.orgId, req.params.repo), resolved);
    for (const [name, value] of Object.entries(res.headers)) {
      if (value === undefined || HOP_BY_HOP.has(name) || (fromClient && name === REPO_HEADER)) continue;
      replyHeaders[name === NODE_HEADER.toLowerCase() ? NODE_HEADER : name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const seconds = (performance.now() - started) / 1000;
    // A 503 is a small error envelope: read, to count the owner's stale-route refusals apart.
    if (res.statusCode === 503) {
      const text = await res.body.text();
      this.metrics.observe('request', text.includes(STALE_REASON) ? 'stale_route' : 'answered', seconds);
      return { status: res.statusCode, text, headers: replyHeaders };
    }
    this.metrics.observe('request', 'answered', seconds);
    const length = res.headers['content-length'] === undefined ? null : Number(res.headers['content-length']);
    if (length === 0) {
      await res.body.dump();
      return { status: res.statusCode, text: '', headers: replyHeaders };
    }
    // A small answer (most reads) is taken whole and written at once: streaming it cost the entry
    // node more CPU than the rest of the hop (2026-11-27-cluster-bench.md).
    if (length !== null && length <= WHOLE_REPLY_BYTES) return { status: res.statusCode, text: new Uint8Array(await res.body.arrayBuffer()), headers: replyHeaders };
    return { status: res.statusCode, stream: res.body, length, headers: replyHeaders };
  }

  private pool(url: string): Pool {
    let pool = this.pools.get(url);
    if (!pool) {
      // No time limits: a clone or a push of a large repository legitimately takes minutes; a
      // dead owner is noticed through its lease (dropDeparted).
      pool = new Pool(url, { connections: CONNECTIONS_PER_PEER, headersTimeout: 0, bodyTimeout: 0 });
      this.pools.set(url, pool);
    }
    return pool;
  }

  async close(): Promise<void> {
    this.unsubscribe();
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }
}

/** The owner found no repository of that id with that name (an error envelope is always small: `text`). */
const repoNotFound = (reply: Reply): boolean => reply.status === 404 && 'text' in reply && Buffer.from(reply.text).includes('"code":"REPO_NOT_FOUND"');

/** Names are case-insensitive within an org. */
const nameKey = (orgId: string, name: string): string => `${orgId}/${name.toLowerCase()}`;
