/**
 * How much an upstream may send. What a pull accepts from upload-pack: 2 GiB per pack is the
 * figure API §14 gives a git push to this server; the per-object limit is the 512 MiB per file of
 * API §5.4, so nothing pulled is larger than what a write may store; the object count bounds the
 * per-object bookkeeping of a pull (its index of offsets and oids, and the oids still expected by
 * the connectivity check). The org quota applies on top, batch by batch, as objects are stored.
 */
import type { PackLimits } from './pack-reader.js';

const MiB = 1024 * 1024;

export const PULL_PACK_LIMITS: PackLimits = {
  maxPackBytes: 2048 * MiB,
  maxObjects: 2_000_000,
  maxObjectBytes: 512 * MiB,
};
