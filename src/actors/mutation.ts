import type { Storage } from '../storage/database.js';
import { LmdbRepoStore } from '../storage/lmdb-repo-store.js';
import { putOutboxEvent } from '../storage/outbox.js';
import { eventShard } from '../storage/shards.js';
import { newId } from '../storage/ids.js';
import type { OrgDirectory } from '../storage/org-directory.js';
import type { EventEnvelope, OperationRecord, OrgRecord, RepoRecord } from '../storage/records.js';
import { noteOutboxEvent } from './system/webhooks/outbox-signal.js';
import type { Batch } from './batch.js';

/**
 * The bookkeeping every mutation writes in its own transaction: one operation-log entry per
 * repository it touched and the outbox events it caused. Writing them here, inside the command's
 * transaction, is what makes "an acknowledged write always yields its events, exactly once" hold.
 */
export class Mutation {
  readonly events: EventEnvelope[] = [];

  constructor(
    private readonly storage: Storage,
    private readonly directory: OrgDirectory,
    private readonly batch: Batch,
    private readonly publicUrl: string,
    private readonly keyId: string | null,
    private readonly now: Date,
  ) {}

  /** Appends an operation to the repository's chain and returns its id; updates `repo.last_op_id`. */
  operation(repo: RepoRecord, kind: string, summary: Record<string, unknown>): string {
    const op: OperationRecord = {
      id: newId('op'),
      repo_id: repo.id,
      parent: repo.last_op_id,
      kind,
      key_id: this.keyId,
      at: this.now.toISOString(),
      summary,
    };
    new LmdbRepoStore(this.storage.meta, repo.id).putOperation(op);
    repo.last_op_id = op.id;
    return op.id;
  }

  emit(type: string, org: OrgRecord, repo: Pick<RepoRecord, 'id' | 'name'> | null, data: Record<string, unknown>): EventEnvelope {
    const event: EventEnvelope = {
      id: newId('evt'),
      type,
      occurred_at: this.now.toISOString(),
      organization: { id: org.id, slug: org.slug, name: org.name },
      repository: repo && {
        id: repo.id,
        name: repo.name,
        url: `${this.publicUrl}/v1/${org.slug}/${encodeURIComponent(repo.name)}`,
      },
      data,
    };
    // The outbox feeds webhook targets only, and a target hears of events from its creation on:
    // an org without targets has nobody to tell, now or later, so nothing is stored. A cluster
    // node cannot tell (a target just created elsewhere may not have reached it) and keeps all.
    // It goes to the outbox of its repository's shard (the org's for an org event): the shard of
    // the actor running this command, since only a repository's actor emits its events.
    if (this.batch.mayHaveTargets(this.directory, org.id)) {
      putOutboxEvent(this.storage.meta, event);
      noteOutboxEvent(eventShard(event));
    }
    this.events.push(event);
    return event;
  }
}
