import type { Database, Key } from 'lmdb';
import { K, lastPart, Ranges } from './keys.js';
import type { RecordReader } from './read/record-cache.js';

/**
 * What the analytics actor keeps per repository (API §10): the document (its JSON text), the
 * state it was computed at, and one kept result per counted commit (`Kept`, the engine's shape).
 * Written by the analytics actor only.
 */
type Meta = Database<unknown, Key>;

export interface AnalyticsState {
  engine: number;
  /** The agent table's fingerprint the kept results were computed with. */
  table: string;
  /** The head commit the document counts (null: the default bookmark was on the virtual root). */
  head: string | null;
  /** The agentblame notes commit the document was computed with. */
  notes: string | null;
  /** A rebuild is writing results: kept results may include commits the document does not count. */
  rebuilding: boolean;
  /** Why the last attempt failed (`_meta.lastError`, kept here too so status needs no document read); "" after a success. */
  error: string;
}

export function getAnalyticsState(meta: RecordReader, repoId: string): AnalyticsState | undefined {
  return meta.get(K.analyticsState(repoId)) as AnalyticsState | undefined;
}

export function putAnalyticsState(meta: Meta, repoId: string, state: AnalyticsState): void {
  meta.putSync(K.analyticsState(repoId), state);
}

export function getAnalyticsText(meta: RecordReader, repoId: string): string | undefined {
  return meta.get(K.analytics(repoId)) as string | undefined;
}

export function hasAnalyticsText(meta: Meta, repoId: string): boolean {
  return meta.doesExist(K.analytics(repoId));
}

export function putAnalyticsText(meta: Meta, repoId: string, text: string): void {
  meta.putSync(K.analytics(repoId), text);
}

export function getKeptCommit<Kept>(meta: RecordReader, repoId: string, oid: string): Kept | undefined {
  return meta.get(K.analyticsCommit(repoId, oid)) as Kept | undefined;
}

export function hasKeptCommit(meta: Meta, repoId: string, oid: string): boolean {
  return meta.doesExist(K.analyticsCommit(repoId, oid));
}

export function putKeptCommit<Kept>(meta: Meta, repoId: string, oid: string, kept: Kept): void {
  meta.putSync(K.analyticsCommit(repoId, oid), kept);
}

export function removeKeptCommit(meta: Meta, repoId: string, oid: string): void {
  meta.removeSync(K.analyticsCommit(repoId, oid));
}

/** Oids of every commit with a kept result. */
export function* keptCommitOids(meta: Meta, repoId: string): Generator<string> {
  for (const key of meta.getKeys(Ranges.analyticsCommits(repoId))) yield lastPart(key);
}
