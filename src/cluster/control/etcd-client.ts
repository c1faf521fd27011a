import { Etcd3, isRecoverableError, type Watcher } from 'etcd3';
import { circuitBreaker, ConsecutiveBreaker, ExponentialBackoff, handleWhen, retry } from 'cockatiel';

/**
 * The etcd client of the control plane. Every unary call gets a deadline: without one, a call
 * that reached a dead or paused member hangs for seconds (7 s measured with etcd 3.4).
 * A failed attempt is retried once on another member, so a call ends within two deadlines. A
 * member that failed three calls in a row is skipped for 1 s: during an election every member
 * fails calls for a moment, and the client's default (5 s) then shut out all of them, keepalives
 * included, long enough for leases to lapse.
 * Streams (watches, lease keepalives) carry no default deadline: keepalives set their own, and a
 * watch lives as long as the view that opened it.
 */
export const ETCD_CALL_DEADLINE_MS = 500;

export function createEtcdClient(opts: { endpoints: string[] }): Etcd3 {
  return new Etcd3({
    hosts: opts.endpoints,
    dialTimeout: ETCD_CALL_DEADLINE_MS,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + ETCD_CALL_DEADLINE_MS }),
    faultHandling: {
      global: retry(handleWhen(isRecoverableError), { maxAttempts: 1 }),
      host: () => circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 1000, breaker: new ConsecutiveBreaker(3) }),
      // A watch whose member died reconnects to another one within a second, not the 30 s the
      // client's default backoff can reach (the client takes the first step, not the factory).
      watchBackoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: 1000 }).next(),
    },
    // HTTP/2 pings find a member that stopped answering on an open watch stream. etcd counts a
    // ping sooner than 5 s after the last as abuse (--grpc-keepalive-min-time) and, after two,
    // closes the connection: 10 s keeps well clear of that.
    grpcOptions: { 'grpc.keepalive_time_ms': 10_000, 'grpc.keepalive_timeout_ms': 2000 },
  });
}

/** A deadline for a call that must not take the default one (e.g. a keepalive shorter than it). */
export const deadlineIn = (ms: number): { deadline: Date } => ({ deadline: new Date(Date.now() + ms) });

/**
 * Waits until `watcher` is created on etcd, or resolves null (and cancels it) once `signal`
 * aborts. The client's own `create()` is not used: on a closed client it never settles, and the
 * client then retries the watch's stream forever, which also keeps the process alive.
 */
export async function watchCreated(watcher: Watcher, signal: AbortSignal): Promise<Watcher | null> {
  let onAbort = (): void => undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      onAbort = resolve;
      if (signal.aborted) return resolve();
      signal.addEventListener('abort', onAbort, { once: true });
      watcher.once('connected', () => resolve());
      watcher.once('error', reject);
    });
  } catch (err) {
    void watcher.cancel().catch(() => undefined);
    throw err;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  if (!signal.aborted) return watcher;
  void watcher.cancel().catch(() => undefined);
  return null;
}
