/**
 * The sync actor's worker thread: the network half of every sync (git smart-HTTP I/O, packfile
 * parsing and writing, object storage) runs here, beside the repository actors and off the
 * front end's event loop. Several jobs interleave on this thread at their `await`s; the
 * scheduler on the main thread decides which run. A job never writes repository metadata: it
 * returns what it found and the scheduler hands that to the repository's actor.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { openStorage } from '../../../storage/database.js';
import { serverStorage } from '../../../storage/server-storage.js';
import { SecretBox } from '../../../storage/secret-box.js';
import { getRepo } from '../../../storage/repo-store.js';
import { checkUrlForm } from '../../../net/address-policy.js';
import { log, setLogLevel } from '../../../log.js';
import type { SyncDirection, SyncRefStat } from '../../../storage/records.js';
import { allowanceRequester } from '../../allowance-port.js';
import { fetchUpstream } from './fetch-job.js';
import { gitHttpClient } from './git-http.js';
import { remoteFor, type Remote, type UpstreamAuth } from './git-remote.js';
import type { PulledRefs } from './pull-apply.js';
import { pushUpstream } from './push-job.js';
import type { RefGlobs } from './ref-filter.js';
import { SyncFailure, classifyFailure } from './sync-errors.js';

export interface SyncWorkerData {
  dataDir: string;
  allowPrivateUpstreams: boolean;
  /** The org storage quota a pull's objects are charged against (0: unlimited). */
  orgQuotaBytes: number;
  /** REPOHOST_MIN_FREE_BYTES: a pull stops storing before the disk is that full. */
  minFreeBytes: number;
  idleTimeoutMs: number;
  logLevel: string;
}

export interface SyncJob {
  sync_id: string;
  repo_id: string;
  direction: SyncDirection;
  ref_globs: RefGlobs;
  /** Serves a pull's quota refills (allowance-port.ts); absent when the quota is unlimited. */
  quota_port?: MessagePort;
}

export type SyncJobResult =
  | { ok: true; pulled: PulledRefs }
  | { ok: true; pushed: SyncRefStat[] }
  | { ok: false; transient: boolean; message: string };

const data = workerData as SyncWorkerData;
setLogLevel(data.logLevel);
const storage = serverStorage(openStorage(data.dataDir));
const secrets = SecretBox.forDataDir(data.dataDir);
const http = gitHttpClient({ allowPrivate: data.allowPrivateUpstreams, idleTimeoutMs: data.idleTimeoutMs, userAgent: 'git/repohost' });

function openUpstream(repoId: string): Remote {
  const repo = getRepo(storage.meta, repoId);
  if (!repo) throw new SyncFailure('the repository no longer exists', false);
  if (!repo.upstream) throw new SyncFailure('the repository has no upstream configured', false);
  try {
    checkUrlForm(repo.upstream.url, 'upstream url');
  } catch (err) {
    throw new SyncFailure((err as Error).message, false);
  }
  const auth = repo.upstream.sealed_auth ? (JSON.parse(secrets.open(repo.upstream.sealed_auth)) as UpstreamAuth) : null;
  return remoteFor(repo.upstream.url, auth, http);
}

export default async function runSyncJob(job: SyncJob): Promise<SyncJobResult> {
  let remote: Remote | null = null;
  // This thread mostly reads what other threads wrote: start from the latest snapshot.
  storage.root.resetReadTxn();
  try {
    remote = openUpstream(job.repo_id);
    if (job.direction === 'pull') {
      const target = { repoId: job.repo_id, owner: job.sync_id, quotaBytes: data.orgQuotaBytes, refill: job.quota_port ? allowanceRequester(job.quota_port) : null, disk: { dataDir: data.dataDir, minFreeBytes: data.minFreeBytes } };
      return { ok: true, pulled: await fetchUpstream(storage, remote, target, job.ref_globs) };
    }
    return { ok: true, pushed: await pushUpstream(storage, remote, job.repo_id, job.ref_globs) };
  } catch (err) {
    const verdict = classifyFailure(err, remote?.secrets ?? []);
    log.warn('sync try failed', { sync_id: job.sync_id, repo_id: job.repo_id, transient: verdict.transient, error: verdict.message });
    return { ok: false, ...verdict };
  } finally {
    job.quota_port?.close();
  }
}
