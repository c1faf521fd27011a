import type { Test } from 'tap';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTarget } from '../../src/actors/commands/webhooks.js';
import type { CommandContext } from '../../src/actors/command.js';
import { Batch } from '../../src/actors/batch.js';
import { Mutation } from '../../src/actors/mutation.js';
import { WebhookDispatcher } from '../../src/actors/system/webhooks/dispatcher.js';
import type { ShardOwnership } from '../../src/actors/system/shard-ownership.js';
import { deliveryLog, hasPendingDeliveries, type DeliveryRecord } from '../../src/storage/webhook-store.js';
import { createOrg } from '../../src/storage/admin-store.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import type { OrgDirectory } from '../../src/storage/org-directory.js';
import { openStorage, type Storage } from '../../src/storage/database.js';
import type { OrgRecord } from '../../src/storage/records.js';
import { SecretBox } from '../../src/storage/secret-box.js';
import { ManualClock } from '../helpers/manual-clock.js';
import { startWebhookReceiver, type Behaviour, type ReceivedDelivery, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * The webhook actor in the test's own process, on a clock moved by hand, a real LMDB environment
 * and a real receiver: one org, one org-wide target hearing `repo.updated` on PATH, and the events
 * a test writes to the outbox as writes do. Each call makes its own of everything. The retry base
 * is the default (10 s), so the whole retry schedule spans about 12 hours of the clock.
 */
export const RETRY_BASE_MS = 10_000;
export const PATH = '/hook';
// A memory file system where there is one: what is under test is the scheduling, not the disk
// (test/webhooks/durability.test.ts and test/soak kill the server on a real one), and on a busy
// disk every commit's flush would cost more than the test itself.
const DATA_ROOT = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();

export interface Actor {
  clock: ManualClock;
  rx: WebhookReceiver;
  storage: Storage;
  /**
   * Commits an event per [repository, n, type] to the outbox in one transaction, as writes do, and
   * wakes the actor; the type is `repo.updated` (the one the target hears) unless given.
   */
  emit(...events: Array<[repo: string, n: number, type?: string]>): void;
  /** The target's delivery log, oldest first. */
  deliveries(): DeliveryRecord[];
  /** Whether any delivery of the target is still queued. */
  queued(): boolean;
  /** Waits until the delivery of (repo, n) has `attempts` attempts recorded and, when it is pending, its retry is scheduled. */
  settled(repo: string, n: number, attempts: number): Promise<DeliveryRecord>;
  /** Moves the clock to a pending delivery's next attempt. */
  retry(d: DeliveryRecord): void;
  /** Stops the actor and starts another on the same data directory. */
  restart(): Promise<void>;
  dispatcher: WebhookDispatcher;
}

/** `<repository id>:<n>` of a received event. */
export const tag = (d: ReceivedDelivery): string => `${d.body.repository.id}:${d.body.data.n}`;

async function until<T>(probe: () => T | undefined | false, what: string, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

export async function startActor(
  t: Test,
  opts: { timeoutMs?: number; allowPrivate?: boolean; behave?: (req: ReceivedDelivery, nth: number) => Behaviour; ownership?: ShardOwnership } = {},
): Promise<Actor> {
  const dir = mkdtempSync(join(DATA_ROOT, 'repohost-retries-'));
  const storage = openStorage(dir);
  const secrets = SecretBox.forDataDir(dir);
  const clock = new ManualClock();
  const rx = await startWebhookReceiver({ now: () => clock.now() });
  const directory: OrgDirectory = new LmdbOrgDirectory(storage);
  const org: OrgRecord = createOrg(directory, 'acme');
  const now = new Date(clock.now());
  const ctx = { storage, directory, secrets, now, batch: new Batch(now) } as CommandContext;
  const created = storage.root.transactionSync(() =>
    createTarget.handle({ org_id: org.id, allowed_repo_ids: null, url: rx.url(PATH), name: 'hook', events: ['repo.updated'], repo_ids: null }, ctx),
  ).body as { id: string; secret: string };
  rx.setSecret(PATH, created.secret);
  if (opts.behave) rx.behave(PATH, opts.behave);
  const start = (): WebhookDispatcher => {
    const d = new WebhookDispatcher({
      storage, directory, secrets, clock, brand: 'Svc', allowPrivate: opts.allowPrivate ?? true, retryBaseMs: RETRY_BASE_MS, pollMs: 25,
      concurrencyPerTarget: 32, timeoutMs: opts.timeoutMs ?? 10_000, retentionMs: 7 * 24 * 3600 * 1000, ownership: opts.ownership,
    });
    d.start();
    return d;
  };
  const deliveries = (): DeliveryRecord[] => [...deliveryLog(storage.meta, created.id)];
  const actor: Actor = {
    clock,
    rx,
    storage,
    dispatcher: start(),
    emit(...events) {
      const at = new Date(clock.now());
      const mutation = new Mutation(storage, directory, new Batch(at), 'https://repohost.test', null, at);
      storage.root.transactionSync(() => events.forEach(([repo, n, type]) => mutation.emit(type ?? 'repo.updated', org, { id: repo, name: repo }, { n })));
      actor.dispatcher.wake();
    },
    deliveries,
    queued: () => hasPendingDeliveries(storage.meta, created.id),
    settled(repo, n, attempts) {
      return until(() => {
        const d = deliveries().find((x) => JSON.parse(x.body).repository.id === repo && JSON.parse(x.body).data.n === n);
        if (!d || d.attempts < attempts) return undefined;
        if (d.status !== 'pending') return d;
        return clock.hasTimerAt(Date.parse(d.next_attempt_at!)) && d;
      }, `attempt ${attempts} of ${repo}:${n}`);
    },
    retry(d) {
      clock.advanceTo(Date.parse(d.next_attempt_at!));
    },
    async restart() {
      await actor.dispatcher.stop();
      actor.dispatcher = start();
    },
  };
  t.teardown(async () => {
    await actor.dispatcher.stop();
    await rx.close();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return actor;
}

