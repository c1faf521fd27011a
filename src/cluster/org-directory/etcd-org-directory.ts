import type { Etcd3, IKeyValue, IWatchResponse, Watcher } from 'etcd3';
import { performance } from 'node:perf_hooks';
import { ServiceError } from '../../errors.js';
import { log } from '../../log.js';
import { DirectoryView } from './directory-view.js';
import { createEtcdClient } from '../control/etcd-client.js';
import type { OrgDirectory } from '../../storage/org-directory.js';
import type { OrgRecord, SigningKeyRecord } from '../../storage/records.js';
import type { WebhookTargetRecord } from '../../storage/webhook-store.js';

/** Keys read per range request while loading, so no reply nears gRPC's 4 MiB message limit. */
const LOAD_PAGE = 500;
/** How long a write waits for its own change to come back through the watch. */
const ECHO_WAIT_MS = 2000;
/** Attempts of a key update that keeps losing its compare-and-swap to other writers. */
const UPDATE_ATTEMPTS = 5;
/**
 * How often the watch is checked against etcd. A watch stream on a member that stopped without
 * closing its connection (paused, cut off) delivers nothing and reports no error: a check that
 * finds changes the watch has not delivered, twice with no progress, moves the watch to a new
 * connection.
 */
const WATCH_CHECK_MS = 1000;
/**
 * The fan-out's catch-ups (`caughtUp`) start at most this often per thread: under write load a
 * catch-up per drained batch took a sixth of a 3-node cluster's writes (etcd range reads); this
 * way a delivery waits up to this long more, and batches grow instead.
 */
const CATCH_UP_INTERVAL_MS = 25;

/** The etcd keys of the directory, under `/rh/<cluster>/global/` (docs/design.md, "The org directory"). */
export class GlobalKeys {
  readonly prefix: string;
  constructor(cluster: string) {
    this.prefix = `/rh/${cluster}/global/`;
  }
  org = (id: string): string => `${this.prefix}org/${id}`;
  slug = (slug: string): string => `${this.prefix}org-slug/${slug}`;
  key = (id: string): string => `${this.prefix}key/${id}`;
  target = (orgId: string, id: string): string => `${this.prefix}wht/${orgId}/${id}`;
  targets = (): string => `${this.prefix}wht/`;
}

/**
 * The org directory of a cluster node: the records live in etcd, and every directory holds all of
 * them in memory. `open` reads them at one revision R (in pages, all at R) and watches from R + 1,
 * so no change is missed or applied twice; the client resumes a broken watch from the last
 * revision it delivered. Reads never wait on etcd. `version()` is the revision of the last change
 * applied, so it moves exactly when the view does.
 *
 * A write is checked against the view, sent at once as one transaction that compares what it
 * depends on (a slug not yet taken, a key or target unchanged since it was read), and awaited by
 * `flush()`, which resolves once the watch has brought the change back into this view: the writer
 * reads its own write. Other nodes see it within their watch latency.
 *
 * The watch has a client of its own, on one member at a time, replaced by a client of the next
 * member when the check below finds it stalled: a client of every member would pick one at random
 * and could land on the stopped one again. The writes and the check share a client of every member.
 * Both are the control plane's clients, with its deadlines and retries.
 */
export class EtcdOrgDirectory implements OrgDirectory {
  private view = new DirectoryView();
  private applied = 0;
  private readonly echoes: Array<{ revision: number; resolve: (applied: boolean) => void }> = [];
  private staged: Array<Promise<number>> = [];
  private watcher: Watcher | null = null;
  private watchClient: Etcd3;
  /** The member the watch client talks to, as an index into the endpoints. */
  private watchMember: number;
  private readonly checkTimer: NodeJS.Timeout;
  /** `applied` when the last check found undelivered changes; null when it found none. */
  private behindAt: number | null = null;
  private closed = false;
  /** True while the directory is read again after its watch failed. */
  private loading = false;
  /** Watches moved to a new connection because they had stalled (the log says when). */
  private stalls = 0;
  /** The catch-up callers wait for, until it starts; then the next caller makes a new one. */
  private nextCatchUp: Promise<boolean> | null = null;
  private lastCatchUp = -Infinity;

  private constructor(
    private readonly endpoints: string[],
    private readonly client: Etcd3,
    private readonly paths: GlobalKeys,
  ) {
    this.watchMember = Math.floor(Math.random() * endpoints.length);
    this.watchClient = createEtcdClient({ endpoints: [endpoints[this.watchMember]!] });
    this.checkTimer = setInterval(() => void this.checkWatch(), WATCH_CHECK_MS).unref();
  }

  /** Loads the whole directory and starts following it; fails if etcd cannot answer in time. */
  static async open(endpoints: string[], cluster: string): Promise<EtcdOrgDirectory> {
    const directory = new EtcdOrgDirectory(endpoints, createEtcdClient({ endpoints }), new GlobalKeys(cluster));
    try {
      await directory.load();
    } catch (err) {
      await directory.close();
      throw err;
    }
    return directory;
  }

  version(): number {
    return this.applied;
  }

  /** The view moves with the watch: there is no snapshot to renew. */
  refresh(): void {}

  org(orgId: string): OrgRecord | undefined {
    const org = this.view.orgs.get(orgId);
    return org && { ...org };
  }

  orgBySlug(slug: string): OrgRecord | undefined {
    const id = this.view.slugs.get(slug);
    return id === undefined ? undefined : this.org(id);
  }

  *orgs(): Generator<OrgRecord> {
    for (const org of this.view.orgs.values()) yield { ...org };
  }

  createOrg(org: OrgRecord): void {
    if (this.view.slugs.has(org.slug)) throw slugTaken(org.slug);
    const slugKey = this.paths.slug(org.slug);
    this.stage(async () => {
      const res = await this.client
        .if(slugKey, 'Create', '==', 0)
        .then(this.client.put(slugKey).value(org.id), this.client.put(this.paths.org(org.id)).value(JSON.stringify(org)))
        .commit();
      if (res.succeeded) return res.header.revision;
      return (await this.committedAs(slugKey, org.id)) ?? Promise.reject(slugTaken(org.slug));
    });
  }

  key(keyId: string): SigningKeyRecord | undefined {
    const held = this.view.keys.get(keyId);
    return held && structuredClone(held.record);
  }

  *keys(): Generator<SigningKeyRecord> {
    for (const held of this.view.keys.values()) yield structuredClone(held.record);
  }

  orgKeys(orgId: string): SigningKeyRecord[] {
    return [...(this.view.keysByOrg.get(orgId) ?? [])].sort().map((id) => this.key(id)!);
  }

  createKey(key: SigningKeyRecord): void {
    const keyKey = this.paths.key(key.id);
    this.stage(async () => {
      const res = await this.client.if(keyKey, 'Create', '==', 0).then(this.client.put(keyKey).value(JSON.stringify(key))).commit();
      if (res.succeeded) return res.header.revision;
      return (await this.committedAs(keyKey, JSON.stringify(key))) ?? Promise.reject(new ServiceError('ABORTED', `key ${key.id} already exists`));
    });
  }

  /**
   * Runs `change` on the view's record now (its error is thrown here); if another writer changed
   * the key first, reads the key from etcd and runs `change` again on that, a few times at most.
   */
  updateKey(keyId: string, change: (key: SigningKeyRecord) => void): SigningKeyRecord {
    const held = this.view.keys.get(keyId);
    if (!held) throw keyNotFound(keyId);
    const record = structuredClone(held.record);
    change(record);
    const keyKey = this.paths.key(keyId);
    this.stage(async () => {
      let next = record;
      let mod = held.mod;
      for (let attempt = 1; ; attempt++) {
        const res = await this.client.if(keyKey, 'Mod', '==', mod).then(this.client.put(keyKey).value(JSON.stringify(next))).commit();
        if (res.succeeded) return res.header.revision;
        if (attempt === UPDATE_ATTEMPTS) throw new ServiceError('ABORTED', `key ${keyId} keeps changing; try again`);
        const kv = (await this.client.get(keyKey).exec()).kvs[0];
        if (!kv) throw keyNotFound(keyId);
        // The client retries a call whose reply was lost: the comparison then fails on our own write.
        if (kv.value.toString('utf8') === JSON.stringify(next)) return kv.mod_revision;
        next = JSON.parse(kv.value.toString('utf8')) as SigningKeyRecord;
        change(next);
        mod = kv.mod_revision;
      }
    });
    return record;
  }

  target(orgId: string, targetId: string): WebhookTargetRecord | undefined {
    const held = this.view.targets.get(orgId)?.get(targetId);
    return held && structuredClone(held.record);
  }

  /** Target ids sort by creation time. */
  targets(orgId: string): WebhookTargetRecord[] {
    const held = this.view.targets.get(orgId);
    if (!held) return [];
    return [...held.keys()].sort().map((id) => structuredClone(held.get(id)!.record));
  }

  *targetsNewestFirst(orgId: string, before?: string): Generator<WebhookTargetRecord> {
    const held = this.view.targets.get(orgId);
    if (!held) return;
    // The ids are sorted on every page (the view holds them in a map); a record is copied only when the page reaches it.
    const ids = [...held.keys()].filter((id) => before === undefined || id < before).sort();
    for (let i = ids.length - 1; i >= 0; i--) {
      const record = held.get(ids[i]!)?.record;
      if (record) yield structuredClone(record);
    }
  }

  /**
   * Always: a target created through another node reaches this view within the watch latency,
   * and a write made right after its 201 may be here first. The fan-out asks `caughtUp()` before
   * it matches the events kept.
   */
  mayHaveTargets(): boolean {
    return true;
  }

  /**
   * Asks etcd which targets changed after the last revision this view applied, and waits (at most
   * ECHO_WAIT_MS) for the watch to bring the latest of them. False when etcd does not answer or
   * the watch stays behind. Callers share the next question (one in flight started before they
   * called does not count for them), asked at most every CATCH_UP_INTERVAL_MS.
   */
  caughtUp(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (!this.nextCatchUp) {
      const wait = this.lastCatchUp + CATCH_UP_INTERVAL_MS - performance.now();
      this.nextCatchUp = new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, wait))).then(() => {
        this.nextCatchUp = null;
        this.lastCatchUp = performance.now();
        return this.catchUp();
      });
    }
    return this.nextCatchUp;
  }

  private async catchUp(): Promise<boolean> {
    if (this.closed) return false;
    const prefix = this.paths.targets();
    let latest = 0;
    try {
      const res = await this.client.kv.range({ key: Buffer.from(prefix), range_end: rangeEnd(prefix), min_mod_revision: this.applied + 1, keys_only: true });
      for (const kv of res.kvs) latest = Math.max(latest, Number(kv.mod_revision));
    } catch {
      return false;
    }
    return this.echo(latest);
  }

  /** Creates the target, or replaces it as this view holds it: a change made meanwhile elsewhere is ABORTED, not overwritten. */
  putTarget(target: WebhookTargetRecord): void {
    const targetKey = this.paths.target(target.org_id, target.id);
    const held = this.view.targets.get(target.org_id)?.get(target.id);
    const unchanged = held ? this.client.if(targetKey, 'Mod', '==', held.mod) : this.client.if(targetKey, 'Create', '==', 0);
    this.stage(async () => {
      const res = await unchanged.then(this.client.put(targetKey).value(JSON.stringify(target))).commit();
      if (res.succeeded) return res.header.revision;
      return (await this.committedAs(targetKey, JSON.stringify(target))) ?? Promise.reject(targetChanged(target.id));
    });
  }

  removeTarget(orgId: string, targetId: string): void {
    const targetKey = this.paths.target(orgId, targetId);
    this.stage(async () => (await this.client.delete().key(targetKey).exec()).header.revision);
  }

  flush(): Promise<number> | null {
    if (this.staged.length === 0) return null;
    const writes = this.staged;
    this.staged = [];
    return Promise.all(writes).then((revisions) => Math.max(...revisions));
  }

  /** Waits (at most ECHO_WAIT_MS) for the watch to bring `revision` into this view. */
  async reached(revision: number): Promise<void> {
    await this.echo(revision);
  }

  /**
   * The revision of `key` if it holds exactly `value`: a write whose comparison failed because the
   * client retried it after its first attempt committed (the reply was lost) has succeeded.
   */
  private async committedAs(key: string, value: string): Promise<string | undefined> {
    const kv = (await this.client.get(key).exec()).kvs[0];
    return kv && kv.value.toString('utf8') === value ? kv.mod_revision : undefined;
  }

  /** Stops following etcd and closes both clients. */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    clearInterval(this.checkTimer);
    this.endWatch();
    this.client.close();
    for (const echo of this.echoes.splice(0)) echo.resolve(false);
    return Promise.resolve();
  }

  /**
   * Starts a write now and keeps it for `flush()`; it settles once this view shows it. A failure
   * to reach etcd is UNAVAILABLE (a client may retry), a lost comparison the write's own error.
   */
  private stage(write: () => Promise<string>): void {
    const done = write().then(
      async (revision) => {
        await this.echo(Number(revision));
        return Number(revision);
      },
      (err: unknown) => {
        if (err instanceof ServiceError) throw err;
        log.warn('org directory: a write did not reach etcd', { error: (err as Error).message });
        throw new ServiceError('UNAVAILABLE', 'the cluster directory (etcd) did not answer', undefined, { retryAfter: 1 });
      },
    );
    // A failure is reported by flush(); until then it must not count as unhandled.
    done.catch(() => undefined);
    this.staged.push(done);
  }

  /**
   * Resolves to true once the watch has applied `revision`, to false after ECHO_WAIT_MS or when
   * the directory closes (a write is committed either way).
   */
  private echo(revision: number): Promise<boolean> {
    if (this.applied >= revision) return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        log.warn('org directory: a committed change has not come back through the watch yet', { revision, applied: this.applied });
        resolve(false);
      }, ECHO_WAIT_MS);
      timer.unref();
      this.echoes.push({
        revision,
        resolve: (applied) => {
          clearTimeout(timer);
          resolve(applied);
        },
      });
    });
  }

  /**
   * Reads every key at one revision (in pages, all at that revision) into a new view, swapped in
   * whole, then follows from the next revision.
   */
  private async load(): Promise<void> {
    const end = rangeEnd(this.paths.prefix);
    const view = new DirectoryView();
    let from = Buffer.from(this.paths.prefix);
    let revision = 0;
    for (;;) {
      const page = await this.client.kv.range({ key: from, range_end: end, limit: LOAD_PAGE, ...(revision ? { revision } : {}) });
      if (!revision) revision = Number(page.header.revision);
      for (const kv of page.kvs) view.put(this.path(kv), kv.value.toString('utf8'), kv.mod_revision);
      if (!page.more || page.kvs.length === 0) break;
      from = Buffer.concat([page.kvs[page.kvs.length - 1]!.key, Buffer.from([0])]);
    }
    this.view = view;
    this.applied = revision;
    this.follow(revision + 1);
  }

  /**
   * Watches from `from` on the watch client. Its connection is not awaited: a watch that never
   * connects (a stopped member) is found by the check like a stalled one.
   */
  private follow(from: number): void {
    const watcher = this.watchClient.watch().prefix(this.paths.prefix).startRevision(String(from)).watcher();
    this.watcher = watcher;
    // A watch replaced meanwhile (on a new connection) is ignored from then on.
    const current = (): boolean => this.watcher === watcher && !this.closed;
    watcher.on('data', (res) => current() && this.apply(res));
    watcher.on('disconnected', (err) => current() && log.warn('org directory: watch disconnected, resuming', { error: err.message, applied: this.applied }));
    // Not recoverable by resuming (the revision was compacted away, the watch was cancelled): start over.
    watcher.on('error', (err) => {
      if (!current()) return;
      log.error('org directory: watch failed, loading the directory again', { error: err.message, applied: this.applied });
      void this.reload();
    });
  }

  /**
   * Counts the directory's keys changed after the last revision applied. Found twice in a row with
   * nothing applied in between, the watch is stalled: it restarts on a new connection from there.
   */
  private async checkWatch(): Promise<void> {
    if (this.closed || this.loading) return;
    const applied = this.applied;
    let undelivered: number;
    try {
      // Keys only, counted here: etcd applies `min_mod_revision` to the keys it returns but not to
      // `count`, so a count alone called every idle directory stalled and restarted its watch.
      const res = await this.client.kv.range({ key: Buffer.from(this.paths.prefix), range_end: rangeEnd(this.paths.prefix), min_mod_revision: applied + 1, keys_only: true });
      undelivered = res.kvs.length;
    } catch {
      return; // etcd did not answer in time: nothing to compare with
    }
    if (this.closed || this.loading) return;
    if (undelivered === 0 || this.applied !== applied) {
      this.behindAt = null;
      return;
    }
    if (this.behindAt !== applied) {
      this.behindAt = applied;
      return;
    }
    this.behindAt = null;
    this.stalls++;
    log.warn('org directory: the watch delivers nothing while etcd has newer changes; moving it to the next member', { applied });
    this.renewWatchClient();
    this.follow(applied + 1);
  }

  /** How many times the watch was found stalled and moved. */
  get watchStalls(): number {
    return this.stalls;
  }

  private renewWatchClient(): void {
    this.endWatch();
    this.watchMember = (this.watchMember + 1) % this.endpoints.length;
    this.watchClient = createEtcdClient({ endpoints: [this.endpoints[this.watchMember]!] });
  }

  /**
   * Ends the watch and its client. The watch is cancelled first, else the client's watch manager
   * keeps reconnecting it after the client is closed; the cancellation is not awaited, as a stalled
   * stream never answers it, and closing the client ends that stream.
   */
  private endWatch(): void {
    this.watcher?.cancel().catch(() => undefined);
    this.watcher = null;
    this.watchClient.close();
  }

  /** Reads the whole directory again; the old view serves reads until the new one is complete. */
  private async reload(): Promise<void> {
    if (this.closed) return;
    this.loading = true;
    try {
      this.renewWatchClient();
      await this.load();
      this.settleEchoes();
      this.loading = false;
    } catch (err) {
      log.error('org directory: reload failed, trying again', { error: (err as Error).message });
      setTimeout(() => void this.reload(), 500).unref();
    }
  }

  private apply(res: IWatchResponse): void {
    for (const event of res.events) {
      if (event.type === 'Put') this.view.put(this.path(event.kv), event.kv.value.toString('utf8'), event.kv.mod_revision);
      else this.view.remove(this.path(event.kv));
      this.applied = Math.max(this.applied, Number(event.kv.mod_revision));
    }
    this.settleEchoes();
  }

  private path(kv: IKeyValue): string {
    return kv.key.toString('utf8').slice(this.paths.prefix.length);
  }

  private settleEchoes(): void {
    for (let i = this.echoes.length - 1; i >= 0; i--) {
      const echo = this.echoes[i]!;
      if (echo.revision <= this.applied) {
        this.echoes.splice(i, 1);
        echo.resolve(true);
      }
    }
  }
}

/** The first key after every key that starts with `prefix`. */
function rangeEnd(prefix: string): Buffer {
  const end = Buffer.from(prefix);
  end[end.length - 1]! += 1;
  return end;
}

const slugTaken = (slug: string): ServiceError => new ServiceError('INVALID_REQUEST', `organization "${slug}" already exists`);
const keyNotFound = (keyId: string): ServiceError => new ServiceError('NOT_FOUND', `key ${keyId} not found`);
const targetChanged = (id: string): ServiceError => new ServiceError('ABORTED', `webhook target ${id} changed meanwhile; read it again and retry`);
