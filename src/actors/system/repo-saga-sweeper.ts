/**
 * The sweeper of repository sagas (actors/repo-saga.ts). A request drives its saga's steps and
 * answers after the last; when the process dies between two, the saga's record stays on the org's
 * shard. A timer on the main thread finds records older than `REPOHOST_SAGA_TIMEOUT_S` and settles
 * each through the two actors, so a name never stays held without a repository: a create whose
 * repository exists is confirmed, one whose repository does not is released, a delete is finished.
 * The bound leaves a live request time to finish its own saga; the steps are idempotent, so a
 * request and the sweeper may both finish one.
 */
import type { Services } from '../../http/services.js';
import { log } from '../../log.js';
import type { PrincipalMsg } from '../../protocol/messages.js';
import { staleSagas } from '../../storage/repo-saga-store.js';
import { orgShard } from '../../storage/shards.js';
import { settleSaga, type StepCall } from '../repo-saga.js';
import type { SystemActor } from './index.js';
import { isTransientActorError, startPeriodicSweep } from './periodic-sweep.js';

const SWEEPER: PrincipalMsg = { orgId: '', orgSlug: '', keyId: '', keyName: 'repo-saga-sweeper', permissions: [], authors: [], restricted: false, allowedRepoIds: [] };

export function sagaSweepIntervalMs(timeoutS: number): number {
  return Math.min(60_000, Math.max(250, (timeoutS * 1000) / 4));
}

export function startRepoSagaSweeper(services: Services): SystemActor {
  const { storage, runtime, config } = services;
  const call: StepCall = (actor, command, input) => runtime.call({ actor, command, input, principal: SWEEPER, traceId: `saga-sweep-${command}` });

  async function sweep(stopped: () => boolean): Promise<void> {
    const cutoff = new Date(Date.now() - config.sagaTimeoutS * 1000).toISOString();
    // The sagas of the orgs whose shard this node serves: the org's shard holds them.
    const orgIds = [...services.directory.orgs()].map((o) => o.id).filter((id) => services.served.owns(orgShard(id)));
    for (const saga of [...staleSagas(storage.meta, orgIds, cutoff)]) {
      if (stopped()) return;
      try {
        const outcome = await settleSaga(call, saga);
        log.info('settled a stale repository saga', { saga_id: saga.id, kind: saga.kind, repo_id: saga.repo_id, outcome });
      } catch (err) {
        if (!isTransientActorError(err)) log.error('settling a repository saga failed', { saga_id: saga.id, err });
      }
    }
  }

  return startPeriodicSweep(sagaSweepIntervalMs(config.sagaTimeoutS), sweep);
}
