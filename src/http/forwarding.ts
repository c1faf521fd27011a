import type { Reply } from './route.js';

/**
 * The markers a request carries between nodes, and the one every reply carries in a cluster. A
 * hop names the shard it was sent for: the receiver serves it only if it owns that shard, and
 * never forwards it on for that shard (docs/design.md, "Forwarding").
 */
export const HOP_HEADER = 'x-repohost-hop';
/** The repository the sender resolved the path's name to (it holds the org's name index; the receiver may not). */
export const REPO_HEADER = 'x-repohost-repo';
/** On every reply in a cluster: the node owning the request's shard, so a client can go there directly. */
export const NODE_HEADER = 'X-Repohost-Node';

/** A request's body as the front end receives it. */
export interface ReceivedBody {
  /** A whole body, being read (routes with a JSON or raw body). */
  body: Promise<Buffer> | null;
  /** A body the handler reads as it arrives (`streamBody` routes). */
  bodyStream: AsyncIterable<Uint8Array> | null;
  /** The body's declared length (0: none declared). */
  declared: number;
}

/** The markers a request from another node carries ('' for a request from a client, and on a single node). */
export interface HopMarkers {
  /** The hop marker (`HOP_HEADER`). */
  hop: string;
  /** The repository id the forwarding node resolved the path's name to (`REPO_HEADER`). */
  hopRepo: string;
}

/** A request as the front end has it when it decides where it is served (cluster mode). */
export interface ForwardableRequest extends ReceivedBody, HopMarkers {
  method: string;
  /** The path as received (percent-encoded), without the query. */
  url: string;
  rawQuery: string;
  params: Record<string, string>;
  /** The token's org, which the path's `{org}` names. */
  orgId: string;
  /** The headers the front end read for the route. */
  headers: Record<string, string>;
  requestId: string;
}

/** Served here (with the repository another node resolved, if it did), or answered by the owner. */
export type RequestPlacement = { here: true; repoId: string | null } | { here: false; reply: Promise<Reply> };

/**
 * Where a request naming an org is served in a cluster (src/cluster/forward/request-forwarder.ts).
 * Absent on a single node: the front end then serves everything itself, as before.
 */
export interface RequestForwarding {
  /** Written into `X-Repohost-Node` of every reply served here. */
  readonly nodeId: string;
  /** Throws 503 for a stale route or a shard without a servable owner. */
  place(request: ForwardableRequest): RequestPlacement;
}
