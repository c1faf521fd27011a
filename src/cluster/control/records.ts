import type { NodeInfo, ShardPlacement } from '../placement.js';

/**
 * The JSON values the control plane keeps in etcd (keys in keys.ts), and their checked decoding:
 * a value some other version wrote badly is ignored rather than trusted.
 */

/** `nodes/<id>`: what a node registers under its lease. */
export interface NodeRecord extends NodeInfo {
  /** The node's lease (decimal string), so the controller can ask how long it still has. */
  lease: string;
}

/**
 * `progress/<id>`: what a node reports about the shards it follows, written under its lease at
 * most once a second (one key per node, not per shard, to keep etcd writes to about one a second
 * per node). The controller flips a graceful move only when the target reports the shard at the
 * placement's current epoch with `lag` at most MOVE_READY_LAG.
 */
export interface NodeProgress {
  shards: Record<string, ShardProgress>;
}

export interface ShardProgress {
  /** The placement epoch the follower is following under. */
  epoch: number;
  /** Last log sequence applied to the follower's LMDB. */
  applied: number;
  /** Records between `applied` and the log's last sequence when it looked. */
  lag: number;
}

/** A follower at most this many records behind may take ownership: the rest is caught up on activation. */
export const MOVE_READY_LAG = 64;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

function parse(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return undefined;
  }
}

export function decodeNodeRecord(raw: string): NodeRecord | undefined {
  const v = parse(raw);
  if (!isObject(v) || typeof v.id !== 'string' || typeof v.url !== 'string' || typeof v.internalUrl !== 'string' || typeof v.lease !== 'string') return undefined;
  return { id: v.id, url: v.url, internalUrl: v.internalUrl, lease: v.lease };
}

export function decodePlacement(raw: string): ShardPlacement | undefined {
  const v = parse(raw);
  if (!isObject(v) || typeof v.owner !== 'string' || !isCount(v.epoch) || !Array.isArray(v.followers)) return undefined;
  if (!v.followers.every((f): f is string => typeof f === 'string')) return undefined;
  return { owner: v.owner, epoch: v.epoch, followers: v.followers };
}

export function decodeProgress(raw: string): NodeProgress | undefined {
  const v = parse(raw);
  if (!isObject(v) || !isObject(v.shards)) return undefined;
  const shards: Record<string, ShardProgress> = {};
  for (const [shard, p] of Object.entries(v.shards)) {
    if (isObject(p) && isCount(p.epoch) && isCount(p.applied) && isCount(p.lag)) shards[shard] = { epoch: p.epoch, applied: p.applied, lag: p.lag };
  }
  return { shards };
}

/** `controller`: the elected node and the lease that binds the key. */
export interface ControllerRecord {
  id: string;
  lease: string;
}

export function decodeControllerRecord(raw: string): ControllerRecord | undefined {
  const v = parse(raw);
  return isObject(v) && typeof v.id === 'string' && typeof v.lease === 'string' ? { id: v.id, lease: v.lease } : undefined;
}

export const encodePlacement = (p: ShardPlacement): string => JSON.stringify({ owner: p.owner, epoch: p.epoch, followers: p.followers });
