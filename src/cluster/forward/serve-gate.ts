/**
 * Whether this node may serve a shard it owns right now. The replica side refuses while a shard
 * is still catching up from its log, and the control side once the node's lease is no longer
 * confirmed (self-fence); the router, the actor listener and the front end ask it before any
 * owned shard is served.
 */
export interface ServeGate {
  canServe(shard: number): boolean;
}
