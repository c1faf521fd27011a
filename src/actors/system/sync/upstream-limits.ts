/**
 * How much an upstream may send (issue: a 400 MB ref advertisement once took the server from
 * 224 MB to 2 GB RSS). Every response is read as a stream and cut off at its cap, and a
 * `Content-Length` over the cap is refused before reading.
 */
import type { PackLimits } from './pack-reader.js';

const MiB = 1024 * 1024;

/**
 * The ref advertisement (`info/refs`). Protocol v0 lists every ref, and hosts include their
 * pull-request refs (`refs/pull/*`), so a busy repository's list runs to megabytes: 16 MiB holds
 * about 180,000 refs. Only branches, tags and notes are kept while it is read, so the cap bounds
 * the transfer, not memory.
 */
export const DISCOVERY_MAX_BYTES = 16 * MiB;

/** receive-pack's answer: one status line per pushed ref. */
export const PUSH_REPORT_MAX_BYTES = 4 * MiB;

/**
 * What a pull accepts from upload-pack. 2 GiB per pack is the figure API §14 gives a git push
 * to this server; the per-object limit is the 512 MiB per file of API §5.4, so nothing pulled is
 * larger than what a write may store; the object count bounds the per-object bookkeeping of a
 * pull (its index of offsets and oids, and the oids still expected by the connectivity check).
 * The org quota applies on top, batch by batch, as objects are stored.
 */
export const PULL_PACK_LIMITS: PackLimits = {
  maxPackBytes: 2048 * MiB,
  maxObjects: 2_000_000,
  maxObjectBytes: 512 * MiB,
};

/** The whole upload-pack answer: the pack plus its side-band framing and protocol lines. */
export const PULL_ANSWER_MAX_BYTES = PULL_PACK_LIMITS.maxPackBytes + PULL_PACK_LIMITS.maxPackBytes / 1024 + MiB;
