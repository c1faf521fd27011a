import { ServiceError } from '../errors.js';
import type { Storage } from './database.js';
import { commitCount } from './replica-position.js';
import { recordingStorage, WriteRecorder } from './write-recorder.js';
import { journalSink } from './write-set-journal.js';
import { ThreadReplication } from '../cluster/replica/thread-sink.js';

/** Set by the server in cluster mode before it starts any thread (every thread inherits it). */
export const REPLICATION_ENV = 'REPOHOST_INTERNAL_REPLICATION';

/** This thread's replication in cluster mode (null on a single node). */
export let threadReplication: ThreadReplication | null = null;

/**
 * The storage a thread of the server writes through. `storage` itself unless this process records
 * its writes: then a recording view of it (write-recorder.ts), one recorder per thread. In cluster
 * mode every write set goes to the shard logs (cluster/replica/thread-sink.ts); tests may name a
 * journal directory in REPOHOST_WRITE_SET_JOURNAL instead. Both are read here because every thread
 * must agree and each opens its own storage.
 */
export function serverStorage(storage: Storage): Storage {
  if (process.env[REPLICATION_ENV] === '1') {
    const replication = (threadReplication ??= new ThreadReplication());
    const recording = recordingStorage(storage, new WriteRecorder(replication.sink, replication.seal));
    replication.attach(recording);
    return recording;
  }
  const journal = process.env.REPOHOST_WRITE_SET_JOURNAL;
  if (!journal) return storage;
  return recordingStorage(storage, new WriteRecorder(journalSink(journal)));
}

/**
 * Resolves once nothing of `shard` that this thread's current snapshot shows can still be lost:
 * at once on a single node; in cluster mode once the shard log holds every commit the snapshot
 * counts (the read fence's rule, src/cluster/replica/acknowledged-reads.ts). Rejects with
 * UNAVAILABLE when it never will. Called before what was read leaves the node; the count is read
 * now, in the snapshot the caller read from.
 */
export function acknowledgedThrough(storage: Storage, shard: number): Promise<void> {
  if (!threadReplication) return Promise.resolve();
  return threadReplication.logged(shard, commitCount(storage, shard)).then((ok) => {
    if (!ok) throw new ServiceError('UNAVAILABLE', `shard ${shard} holds writes here that its log did not acknowledge; retry`, { reason: 'not_acknowledged', shard }, { retryAfter: 1 });
  });
}
