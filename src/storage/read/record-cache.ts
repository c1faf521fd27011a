import type { Database, Key } from 'lmdb';
import { repoIdOfActor } from '../../actors/actor-names.js';

/**
 * The mutable records the front end reads on nearly every request — a repository by name, its
 * record, bookmarks, changes, file metadata, its latest sync — decoded once and kept until a
 * write may have changed them.
 *
 * Why dropping them on an actor call's settlement is exact: every write to these records is a
 * command to the repository's actor (or, for creating, renaming and deleting repositories, to
 * its org's actor), and every actor call settles on the front-end thread before its client hears
 * of it. `invalidate(actor)` runs there — for a reply, an error or a worker that died mid-batch —
 * so a read that follows an acknowledged write finds no entry and reads LMDB afresh. Entries are
 * filled in the same synchronous step that reads them, so a fill can never straddle a settlement.
 * Values are frozen: they are shared by every request that hits them.
 */
export interface RecordReader {
  get(key: Key): unknown;
}

/** Kinds of `['r', repoId, kind, …]` keys written only by the repository's actor. */
const REPO_KINDS = new Set(['bm', 'chg', 'fmeta', 'sync-latest']);
const MAX_SCOPES = 20_000;
const MAX_PER_SCOPE = 4_096;

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
  private scopes = new Map<string, Map<string, unknown>>();

  constructor(private readonly meta: Database<unknown, Key>) {}

  get(key: Key): unknown {
    // A cacheable key's scope is the id of the repository or org whose actor writes it.
    let scopeId: string;
    let entry: string;
    if (!Array.isArray(key)) return this.meta.get(key);
    if (key[0] === 'r' && key.length === 2) {
      scopeId = key[1] as string;
      entry = '';
    } else if (key[0] === 'r' && REPO_KINDS.has(key[2] as string)) {
      scopeId = key[1] as string;
      entry = key.length === 3 ? (key[2] as string) : key.slice(2).join('\0');
    } else if (key[0] === 'o' && key[2] === 'name' && key.length === 4) {
      scopeId = key[1] as string;
      entry = key[3] as string;
    } else return this.meta.get(key);

    let scope = this.scopes.get(scopeId);
    const hit = scope?.get(entry);
    if (hit !== undefined) return hit === MISSING ? undefined : hit;
    const value = deepFreeze(this.meta.get(key));
    if (!scope) {
      if (this.scopes.size >= MAX_SCOPES) this.scopes = new Map();
      this.scopes.set(scopeId, (scope = new Map()));
    } else if (scope.size >= MAX_PER_SCOPE) scope.clear();
    scope.set(entry, value === undefined ? MISSING : value);
    return value;
  }

  /** Called when a call to `actor` settles: what it may have written is read afresh. */
  invalidate(actor: string): void {
    // An org actor writes repository records under other scopes too (rename, delete): drop all.
    const repoId = repoIdOfActor(actor);
    if (repoId !== null) this.scopes.delete(repoId);
    else this.scopes = new Map();
  }
}
