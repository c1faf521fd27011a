import type { Etcd3, IKeyValue, Watcher } from 'etcd3';
import { watchCreated } from './etcd-client.js';

/**
 * An in-memory copy of every key under one etcd prefix: read once, then kept current by a watch
 * that starts at the read's revision + 1, so no change between the read and the watch is missed
 * and none is seen twice. A watch that breaks (its member died, or etcd cancelled it because its
 * revision was compacted away) is replaced by a fresh read and watch, and the differences are
 * reported as changes. The client's own reconnection is not used: it resumes from the revision
 * of the watch's creation, which skips events still in flight when a stream breaks twice.
 */

export interface CachedValue<T> {
  value: T;
  /** The key's mod_revision, the comparand of a compare-and-swap on it. */
  modRevision: string;
}

/** The keys (relative to the prefix) that changed in one etcd revision or re-read. */
export type PrefixListener = (changed: string[]) => void;

export class PrefixCache<T> {
  private readonly entries = new Map<string, CachedValue<T>>();
  private readonly listeners = new Set<PrefixListener>();
  private watcher: Watcher | null = null;
  /** Aborted on close: also ends the wait for a watch being created. */
  private readonly closing = new AbortController();
  /** The etcd revision the cache reflects. */
  revision = 0;

  constructor(
    private readonly client: Etcd3,
    readonly prefix: string,
    private readonly decode: (raw: string) => T | undefined,
  ) {}

  /** Reads the prefix and starts watching; rejects if etcd cannot be read in time. */
  async start(): Promise<void> {
    const res = await this.client.getAll().prefix(this.prefix).exec();
    const seen = new Set<string>();
    const changed: string[] = [];
    for (const kv of res.kvs) {
      const name = this.nameOf(kv);
      seen.add(name);
      if (this.entries.get(name)?.modRevision !== kv.mod_revision && this.apply(name, kv)) changed.push(name);
    }
    for (const name of [...this.entries.keys()]) {
      if (!seen.has(name)) {
        this.entries.delete(name);
        changed.push(name);
      }
    }
    this.revision = Number(res.header.revision);
    if (this.closed) return;
    const watcher = await watchCreated(this.client.watch().prefix(this.prefix).startRevision(String(this.revision + 1)).watcher(), this.closing.signal);
    if (!watcher) return;
    this.watcher = watcher;
    watcher.on('data', (wr) => {
      if (this.watcher !== watcher) return;
      const names: string[] = [];
      for (const ev of wr.events) {
        const name = this.nameOf(ev.kv);
        if (ev.type === 'Delete' ? this.entries.delete(name) : this.apply(name, ev.kv)) names.push(name);
      }
      this.revision = Math.max(this.revision, Number(wr.header.revision));
      if (names.length) this.emit(names);
    });
    watcher.on('disconnected', () => void this.resync(watcher));
    watcher.on('error', () => void this.resync(watcher));
    if (changed.length) this.emit(changed);
  }

  get(name: string): CachedValue<T> | undefined {
    return this.entries.get(name);
  }

  entriesNow(): IterableIterator<[string, CachedValue<T>]> {
    return this.entries.entries();
  }

  onChange(listener: PrefixListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stops watching. The cancel is not awaited: it waits for the stream, which may hang on a stopped member. */
  close(): void {
    this.closing.abort();
    void this.watcher?.cancel().catch(() => undefined);
    this.watcher = null;
  }

  private get closed(): boolean {
    return this.closing.signal.aborted;
  }

  private async resync(old: Watcher): Promise<void> {
    if (this.closed || this.watcher !== old) return;
    this.watcher = null;
    // Not awaited: cancelling waits for the old stream, which may hang on a stopped member.
    void old.cancel().catch(() => undefined);
    while (!this.closed) {
      try {
        return await this.start();
      } catch {
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /** Stores a decoded value; a value that does not decode counts as absent. Returns whether anything changed. */
  private apply(name: string, kv: IKeyValue): boolean {
    const value = this.decode(kv.value.toString('utf8'));
    if (value === undefined) return this.entries.delete(name);
    this.entries.set(name, { value, modRevision: kv.mod_revision });
    return true;
  }

  private nameOf(kv: IKeyValue): string {
    return kv.key.toString('utf8').slice(this.prefix.length);
  }

  private emit(names: string[]): void {
    for (const listener of this.listeners) listener(names);
  }
}
