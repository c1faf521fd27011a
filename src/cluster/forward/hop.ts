import { ServiceError } from '../../errors.js';

export { HOP_HEADER, NODE_HEADER, REPO_HEADER } from '../../http/forwarding.js';

/** Seconds a client waits before retrying a stale route: placement changes settle within a watch round trip. */
const STALE_RETRY_S = 1;

/** The details' `reason` of a stale route's 503, as its JSON envelope spells it. */
export const STALE_REASON = '"reason":"stale_route"';

/** A forwarded request reached a node that does not own its shard: the client retries, the nodes do not. */
export function staleRoute(shard: number): ServiceError {
  return new ServiceError('UNAVAILABLE', `this node does not own shard ${shard} any more; retry`, { reason: 'stale_route', shard }, { retryAfter: STALE_RETRY_S });
}

/** The shard's owner may not serve it now (catching up, or fenced): retry shortly. */
export function notServing(shard: number): ServiceError {
  return new ServiceError('UNAVAILABLE', `shard ${shard} is not being served on this node right now; retry`, { reason: 'not_serving', shard }, { retryAfter: STALE_RETRY_S });
}

/** No owner is known for the shard (not placed yet, or its owner's lease expired). */
export function noOwner(shard: number): ServiceError {
  return new ServiceError('UNAVAILABLE', `shard ${shard} has no live owner right now; retry`, { reason: 'no_owner', shard }, { retryAfter: STALE_RETRY_S });
}

/** The owner could not be reached; the request may or may not have been applied there. */
export function ownerUnreachable(node: string): ServiceError {
  return new ServiceError('UNAVAILABLE', `the node owning this repository (${node}) could not be reached; retry`, { reason: 'owner_unreachable', node }, { retryAfter: STALE_RETRY_S });
}

/** The hop marker's shard number, or null when the request came from a client. */
export function parseHop(header: string): number | null {
  if (header === '') return null;
  const shard = Number(header);
  return Number.isInteger(shard) && shard >= 0 ? shard : null;
}
