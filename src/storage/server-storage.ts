import type { Storage } from './database.js';
import { recordingStorage, WriteRecorder } from './write-recorder.js';
import { journalSink } from './write-set-journal.js';

/**
 * The storage a thread of the server writes through. `storage` itself unless this process records
 * its writes: then a recording view of it (write-recorder.ts), one recorder per thread. Today only
 * tests record, by naming a journal directory in REPOHOST_WRITE_SET_JOURNAL (read here because
 * every thread must agree and each opens its own storage).
 */
export function serverStorage(storage: Storage): Storage {
  const journal = process.env.REPOHOST_WRITE_SET_JOURNAL;
  if (!journal) return storage;
  return recordingStorage(storage, new WriteRecorder(journalSink(journal)));
}
