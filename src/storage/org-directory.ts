import type { OrgRecord, SigningKeyRecord } from './records.js';
import type { WebhookTargetRecord } from './webhook-store.js';

/**
 * The org directory: the org-level records every node needs whatever shards it owns — orgs and
 * their slugs, signing keys, webhook targets — and a version that moves with every change to any
 * of them. It is global data, not shard data: the CLI, the front end's authentication, the org
 * actor's webhook-target commands and the webhook actor all read and write it here, and nothing
 * else touches where it is kept (docs/design.md, "The org directory").
 *
 * Reads are synchronous and cheap, because the front end authenticates every request from them:
 * an implementation serves them from a view it holds (the LMDB environment's mapped pages here; a
 * map filled from an etcd watch in cluster mode). A reader that derives something costly from the
 * records (the verifier's key table, the webhook actor's decoded targets) keeps it while
 * `version()` stays the same and rebuilds it when the number moves.
 *
 * Writes check what they can against the view and throw at once (a taken slug, an unknown key),
 * then are committed by `flush()`. The local implementation commits within the call (inside a
 * caller's LMDB write transaction, the org actor's batch, with that transaction) and has nothing
 * to flush; the etcd one sends each write as a compare-and-swap transaction (a slug is taken once;
 * a key update reads and writes the same record) and `flush()` waits for them. A writer that must
 * not report success early (the CLI, the org actor's reply) awaits `flush()` first.
 */
export interface OrgDirectory {
  /** A number that moves with every change to the directory; equal values mean nothing changed. */
  version(): number;
  /**
   * Lets this thread's next reads see every change committed anywhere before this call, for a
   * check that must not act on an older view (a key revoked while a token's signature was checked).
   */
  refresh(): void;

  org(orgId: string): OrgRecord | undefined;
  orgBySlug(slug: string): OrgRecord | undefined;
  /** Every org, in no particular order. */
  orgs(): Iterable<OrgRecord>;
  /** Stores a new org; INVALID_REQUEST when its slug is taken. */
  createOrg(org: OrgRecord): void;

  key(keyId: string): SigningKeyRecord | undefined;
  /** Every signing key of every org. */
  keys(): Iterable<SigningKeyRecord>;
  orgKeys(orgId: string): SigningKeyRecord[];
  createKey(key: SigningKeyRecord): void;
  /**
   * Applies `change` to the key's current record and stores it; NOT_FOUND for an unknown key. A
   * `change` that throws leaves the key as it was; it may run again on a newer record.
   */
  updateKey(keyId: string, change: (key: SigningKeyRecord) => void): SigningKeyRecord;

  target(orgId: string, targetId: string): WebhookTargetRecord | undefined;
  /** The org's webhook targets in creation order (their ids sort by creation time). */
  targets(orgId: string): WebhookTargetRecord[];
  /** The same newest first, strictly before the id `before` when given, read as they are reached (a page of the list). */
  targetsNewestFirst(orgId: string, before?: string): Iterable<WebhookTargetRecord>;
  /**
   * Whether the org's events must be kept for the webhook fan-out (asked by every write that emits
   * one): the org has a target, or may have one this view has not seen yet.
   */
  mayHaveTargets(orgId: string): boolean;
  /**
   * Resolves to true once this view holds every target committed before the call, false when
   * that cannot be known now (try again later). The fan-out waits for it, so that an event
   * written after its target was acknowledged is never matched against a view without it.
   */
  caughtUp(): Promise<boolean>;
  /** Creates or replaces a target. */
  putTarget(target: WebhookTargetRecord): void;
  removeTarget(orgId: string, targetId: string): void;

  /**
   * The writes made since the last call, committed and visible to this directory's reads when the
   * promise resolves; it rejects with the first write that failed (a lost compare-and-swap is the
   * same error the check would have thrown on a newer view). It resolves to the revision another
   * view passes to `reached`. null when there is nothing to wait for.
   */
  flush(): Promise<number> | null;
  /**
   * Resolves once this view holds the writes another view's `flush()` reported (bounded: a view
   * that cannot catch up stops waiting), so the front end that relays a write reads it back.
   */
  reached(revision: number): Promise<void>;
}
