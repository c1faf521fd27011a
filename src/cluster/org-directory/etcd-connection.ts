import { Etcd3, type IOptions } from 'etcd3';

/** Every unary etcd call ends within this: a call to a dead member otherwise hangs about 7 s. */
export const ETCD_CALL_DEADLINE_MS = 1000;

type Backoff = Exclude<NonNullable<IOptions['faultHandling']>['watchBackoff'], undefined>;

/**
 * How long a broken watch stream waits before it reconnects: doubling from 50 ms up to 1 s. The
 * client's default grows to 30 s, far longer than a node may go without hearing of a revoked key.
 */
function watchBackoff(duration = 50): Backoff {
  return { duration, next: () => watchBackoff(Math.min(duration * 2, 1000)) };
}

/**
 * A client of the cluster's etcd: unary calls carry a deadline, streams (watches) do not, and a
 * failed call is retried on another member by the client's default policy.
 */
export function connectEtcd(endpoints: string[]): Etcd3 {
  return new Etcd3({
    hosts: endpoints,
    dialTimeout: ETCD_CALL_DEADLINE_MS,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + ETCD_CALL_DEADLINE_MS }),
    faultHandling: { watchBackoff: watchBackoff() },
  });
}
