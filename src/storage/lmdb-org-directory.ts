import { ServiceError } from '../errors.js';
import { NESTABLE_COMMIT_THEN_SYNC } from './commit-flags.js';
import type { Storage } from './database.js';
import { K, lastPart, Ranges } from './keys.js';
import type { OrgDirectory } from './org-directory.js';
import type { OrgRecord, SigningKeyRecord } from './records.js';
import type { WebhookTargetRecord } from './webhook-store.js';


const CAUGHT_UP = Promise.resolve(true);
/**
 * The org directory of a single node: records in the data directory's LMDB environment under
 * global keys (no shard number in front, see keys.ts), read on the caller's thread like any
 * record. Every write bumps the version in its own transaction, so a reader that sees a version
 * sees every change before it. The version is stored as `['cfg', 'key-version']`, its name from
 * when it counted key changes only: kept, so existing data directories need no migration.
 *
 * The CLI writes here from its own process while a server runs (LMDB is multi-process safe); the
 * org actor writes webhook targets inside its batch's transaction, which serializes them per org.
 */
export class LmdbOrgDirectory implements OrgDirectory {
  constructor(private readonly storage: Storage) {}

  version(): number {
    return (this.storage.meta.get(K.keyVersion()) as number | undefined) ?? 0;
  }

  /** lmdb-js serves a thread one read snapshot until a timer renews it: this renews it now. */
  refresh(): void {
    this.storage.root.resetReadTxn();
  }

  org(orgId: string): OrgRecord | undefined {
    return this.storage.meta.get(K.org(orgId)) as OrgRecord | undefined;
  }

  orgBySlug(slug: string): OrgRecord | undefined {
    const id = this.storage.meta.get(K.orgSlug(slug)) as string | undefined;
    return id ? this.org(id) : undefined;
  }

  *orgs(): Generator<OrgRecord> {
    for (const { value } of this.storage.meta.getRange(Ranges.orgs())) yield value as OrgRecord;
  }

  createOrg(org: OrgRecord): void {
    const { meta } = this.storage;
    this.write(() => {
      if (meta.get(K.orgSlug(org.slug)) !== undefined) throw new ServiceError('INVALID_REQUEST', `organization "${org.slug}" already exists`);
      meta.putSync(K.org(org.id), org);
      meta.putSync(K.orgSlug(org.slug), org.id);
    });
  }

  key(keyId: string): SigningKeyRecord | undefined {
    return this.storage.meta.get(K.key(keyId)) as SigningKeyRecord | undefined;
  }

  *keys(): Generator<SigningKeyRecord> {
    for (const { value } of this.storage.meta.getRange(Ranges.signingKeys())) yield value as SigningKeyRecord;
  }

  orgKeys(orgId: string): SigningKeyRecord[] {
    const out: SigningKeyRecord[] = [];
    for (const key of this.storage.meta.getKeys(Ranges.orgKeys(orgId))) {
      const record = this.key(lastPart(key));
      if (record) out.push(record);
    }
    return out;
  }

  createKey(key: SigningKeyRecord): void {
    const { meta } = this.storage;
    this.write(() => {
      meta.putSync(K.key(key.id), key);
      meta.putSync(K.orgKey(key.org_id, key.id), true);
    });
  }

  updateKey(keyId: string, change: (key: SigningKeyRecord) => void): SigningKeyRecord {
    return this.write(() => {
      const record = this.key(keyId);
      if (!record) throw new ServiceError('NOT_FOUND', `key ${keyId} not found`);
      change(record);
      this.storage.meta.putSync(K.key(keyId), record);
      return record;
    });
  }

  target(orgId: string, targetId: string): WebhookTargetRecord | undefined {
    return this.storage.meta.get(K.webhookTarget(orgId, targetId)) as WebhookTargetRecord | undefined;
  }

  targets(orgId: string): WebhookTargetRecord[] {
    return [...this.storage.meta.getRange(Ranges.webhookTargets(orgId))].map(({ value }) => value as WebhookTargetRecord);
  }

  targetsNewestFirst(orgId: string, before?: string): Iterable<WebhookTargetRecord> {
    const range = Ranges.webhookTargets(orgId);
    const start = before === undefined ? range.end : K.webhookTarget(orgId, before);
    // `before` itself, when it still exists, is the first key reached: left out.
    return this.storage.meta.getRange({ start, end: range.start, reverse: true }).filter(({ key }) => lastPart(key) !== before).map(({ value }) => value as WebhookTargetRecord);
  }

  /** Exact, as a write's transaction sees the data directory; a key lookup: no record is decoded. */
  mayHaveTargets(orgId: string): boolean {
    for (const _ of this.storage.meta.getKeys({ ...Ranges.webhookTargets(orgId), limit: 1 })) return true;
    return false;
  }

  /** Every read sees the latest commit. */
  caughtUp(): Promise<boolean> {
    return CAUGHT_UP;
  }

  putTarget(target: WebhookTargetRecord): void {
    this.write(() => this.storage.meta.putSync(K.webhookTarget(target.org_id, target.id), target));
  }

  removeTarget(orgId: string, targetId: string): void {
    this.write(() => this.storage.meta.removeSync(K.webhookTarget(orgId, targetId)));
  }

  /** Every write is committed when it returns. */
  flush(): null {
    return null;
  }

  /** Every thread reads the one environment: a committed write is there already. */
  reached(): Promise<void> {
    return Promise.resolve();
  }

  /** Runs `fn` and bumps the version in one transaction (a child of the caller's, inside one). */
  private write<T>(fn: () => T): T {
    return this.storage.root.transactionSync(() => {
      const result = fn();
      this.storage.meta.putSync(K.keyVersion(), this.version() + 1);
      return result;
    }, NESTABLE_COMMIT_THEN_SYNC);
  }
}
