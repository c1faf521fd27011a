import type { HistoryOp, Outcome, RegisterOp, RegisterValue } from './linearizability.js';
import type { ApiOptions, ApiReply } from './server.js';

/**
 * Records bookmark operations made through the API as a register history for the
 * linearizability checker: one register per bookmark (`org/repo/name`), whose value is the
 * bookmark's change id, or null while it does not exist.
 *
 * A reply's meaning: 2xx took effect (or observed what it says); a 4xx other than 408 never took
 * effect ('fail': a refused guard, an existing name); a timeout, a 5xx or a broken connection may
 * or may not have taken effect ('info'). A refused CAS is recorded as a failure, not as an
 * observation of another value: that keeps unknown writes cheap to check (see the checker).
 */

/** How a test reaches one node: the shape of `TestServer.api`. */
export type ApiCall = (method: string, path: string, opts?: ApiOptions) => Promise<ApiReply>;

export interface Recorded {
  outcome: Outcome;
  /** The HTTP status, or null when no reply came (timeout, connection error). */
  status: number | null;
  /** The error code of a 4xx/5xx reply, or the client-side error's message. */
  code?: string;
  /** What a read saw; undefined unless the read succeeded. */
  value?: RegisterValue;
}

export class HistoryRecorder {
  readonly ops: HistoryOp[] = [];

  constructor(private readonly timeoutMs = 5000) {}

  /** GET the bookmark: a read (404 BRANCH_NOT_FOUND reads null). */
  read(api: ApiCall, org: string, repo: string, name: string, client: string): Promise<Recorded> {
    return this.record(api, 'GET', `/${org}/${repo}/bookmarks/${encodeURIComponent(name)}`, undefined, { key: `${org}/${repo}/${name}`, client, op: { f: 'read', value: null } });
  }

  /** POST the bookmark: a CAS from "absent" (409 BRANCH_EXISTS is a refusal). */
  create(api: ApiCall, org: string, repo: string, name: string, changeId: string, client: string): Promise<Recorded> {
    return this.record(api, 'POST', `/${org}/${repo}/bookmarks`, { name, change_id: changeId }, { key: `${org}/${repo}/${name}`, client, op: { f: 'cas', expected: null, value: changeId } });
  }

  /** PATCH the bookmark without a guard (backwards allowed): a write. */
  move(api: ApiCall, org: string, repo: string, name: string, changeId: string, client: string): Promise<Recorded> {
    return this.record(api, 'PATCH', `/${org}/${repo}/bookmarks/${encodeURIComponent(name)}`, { change_id: changeId, allow_backwards: true }, { key: `${org}/${repo}/${name}`, client, op: { f: 'write', value: changeId } });
  }

  /** PATCH the bookmark guarded by `expected_change_id`: a CAS (409 ABORTED is a refusal). */
  cas(api: ApiCall, org: string, repo: string, name: string, expected: string, changeId: string, client: string): Promise<Recorded> {
    const body = { change_id: changeId, expected_change_id: expected, allow_backwards: true };
    return this.record(api, 'PATCH', `/${org}/${repo}/bookmarks/${encodeURIComponent(name)}`, body, { key: `${org}/${repo}/${name}`, client, op: { f: 'cas', expected, value: changeId } });
  }

  /** The acknowledged writes and applied CAS, in order of completion. */
  acknowledgedWrites(): HistoryOp[] {
    return this.ops.filter((h) => h.outcome === 'ok' && h.op.f !== 'read').sort((a, b) => a.completedAt - b.completedAt);
  }

  private async record(api: ApiCall, method: string, path: string, body: unknown, what: { key: string; client: string; op: RegisterOp }): Promise<Recorded> {
    const invokedAt = performance.now();
    let result: Recorded;
    const signal = AbortSignal.timeout(this.timeoutMs);
    try {
      result = classify(what.op, await api(method, path, { body, signal }));
    } catch (err) {
      result = { outcome: 'info', status: null, code: signal.aborted ? 'timeout' : String((err as Error).message) };
    }
    const op: RegisterOp = what.op.f === 'read' ? { f: 'read', value: result.value ?? null } : what.op;
    this.ops.push({ key: what.key, op, outcome: result.outcome, invokedAt, completedAt: performance.now(), client: what.client });
    return result;
  }
}

function classify(op: RegisterOp, res: ApiReply): Recorded {
  const code = res.json?.error?.code as string | undefined;
  if (res.status >= 200 && res.status < 300) {
    return { outcome: 'ok', status: res.status, value: op.f === 'read' ? (res.json.change_id as string) : undefined };
  }
  if (op.f === 'read' && res.status === 404 && code === 'BRANCH_NOT_FOUND') return { outcome: 'ok', status: 404, code, value: null };
  // A 408 may come after the request reached its actor; every other 4xx refused it outright.
  if (res.status >= 400 && res.status < 500 && res.status !== 408) return { outcome: 'fail', status: res.status, code };
  return { outcome: 'info', status: res.status, code };
}
