import type { Database, Key } from 'lmdb';
import { orgIdOfActor, repoIdOfActor } from '../../actors/actor-names.js';
import { LruCache } from './lru-cache.js';

/**
 * The mutable records the front end reads on nearly every request — a repository by name, its
 * record, bookmarks, changes, file metadata, its latest sync — decoded once and kept until a
 * write may have changed them.
 *
 * Every write to these records is a command to the repository's actor (or, for creating,
 * renaming and deleting repositories, to its org's actor), and every actor call is dispatched and
 * settled on the front-end thread, which tells this cache of both. An LMDB commit is visible to
 * readers from the moment it commits, before its flush ends and its call settles; so while a
 * call that may write a scope is in flight, that scope is read from LMDB and neither served from
 * nor filled into the cache — a read never returns a cached value older than what another
 * read has already seen. When the call settles (reply, error, or a worker that died mid-batch)
 * the scope's entries are dropped, and the server renews its read snapshot, so the next fill
 * reads every acknowledged write. Entries are filled in the same synchronous step that reads
 * them, so a fill can never straddle a dispatch or a settlement. Values are frozen: they are
 * shared by every request that hits them.
 */
export interface RecordReader {
  get(key: Key): unknown;
}

/** Kinds of `[shard, 'r', repoId, kind, …]` keys written only by the repository's actor. */
const REPO_KINDS = new Set(['bm', 'chg', 'fmeta', 'sync-latest']);
/**
 * Entries over all scopes. A bound per scope emptied an org's name index whenever it passed a few
 * thousand names, and one on the number of scopes emptied the whole cache at once: reads spread
 * over 10,000 repositories ran at 0.7x those over 1,000.
 */
const MAX_ENTRIES = 131_072;

/** Marks a cached miss (a value LMDB does not have is also worth remembering). */
const MISSING = Symbol('missing');

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as object)) deepFreeze(v);
  }
  return value;
}

export class RecordCache implements RecordReader {
  private readonly entries = new LruCache<unknown>(MAX_ENTRIES, Infinity, () => 0);
  /** Calls in flight per actor's scope (repository or org id). */
  private readonly inFlight = new Map<string, number>();
  /** Calls in flight to any org actor: they may write records of any of the org's repositories. */
  private orgCalls = 0;

  constructor(private readonly meta: Database<unknown, Key>) {}

  get(key: Key): unknown {
    // A cacheable key's scope is the id of the repository or org whose actor writes it.
    let scopeId: string;
    let entry: string;
    let writing: boolean;
    if (!Array.isArray(key)) return this.meta.get(key);
    // Parts after the shard number (a global key has none and is not cached).
    const parts = key as readonly unknown[];
    if (typeof parts[0] !== 'number') return this.meta.get(key);
    const n = parts.length - 1;
    if (parts[1] === 'r' && (n === 2 || REPO_KINDS.has(parts[3] as string))) {
      scopeId = parts[2] as string;
      entry = n === 2 ? '' : n === 3 ? (parts[3] as string) : n === 4 ? `${parts[3] as string}\0${parts[4] as string}` : parts.slice(3).join('\0');
      writing = this.orgCalls > 0 || this.inFlight.has(scopeId);
    } else if (parts[1] === 'o' && parts[3] === 'name' && n === 4) {
      scopeId = parts[2] as string;
      entry = parts[4] as string;
      writing = this.inFlight.has(scopeId);
    } else return this.meta.get(key);
    if (writing) return this.meta.get(key);

    const hit = this.entries.get(entry, scopeId);
    if (hit !== undefined) return hit === MISSING ? undefined : hit;
    const value = deepFreeze(this.meta.get(key));
    this.entries.set(entry, value === undefined ? MISSING : value, scopeId);
    return value;
  }

  /**
   * Forgets every cached record (cluster mode: a shard stopped being served here, and the log
   * may change its records before it is served here again).
   */
  dropAll(): void {
    this.entries.clear();
  }

  /** Called when a call to `actor` is dispatched: from now until it settles, it may commit. */
  dispatched(actor: string): void {
    const repoId = repoIdOfActor(actor);
    if (repoId === null) this.orgCalls++;
    const scopeId = repoId ?? orgIdOfActor(actor);
    this.inFlight.set(scopeId, (this.inFlight.get(scopeId) ?? 0) + 1);
  }

  /** Called when a call to `actor` settles: what it may have written is read afresh. */
  settled(actor: string): void {
    const repoId = repoIdOfActor(actor);
    if (repoId === null) this.orgCalls--;
    const scopeId = repoId ?? orgIdOfActor(actor);
    const n = this.inFlight.get(scopeId)! - 1;
    if (n === 0) this.inFlight.delete(scopeId);
    else this.inFlight.set(scopeId, n);
    // An org actor writes repository records under other scopes too (rename, delete): drop all.
    if (repoId !== null) this.entries.deleteScope(repoId);
    else this.entries.clear();
  }
}
