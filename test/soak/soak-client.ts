import type { TestServer } from '../helpers/server.js';

/**
 * The soak's way to the API: every call either got an answer (any status) or did not (the server
 * was killed under it, or it timed out), and the two are told apart, because a write without an
 * answer may or may not have been applied. While the server is being restarted, calls wait for
 * it instead of piling up refused connections. Every answer is tallied by status, and answers a
 * healthy server never gives (a 5xx other than 503, a 2xx read with wrong data) are kept as
 * anomalies with what was asked.
 */
export type Outcome =
  | { answered: true; status: number; json: any; text: string; headers: Headers }
  | { answered: false; error: string };

export interface CallOptions {
  body?: unknown;
  raw?: Uint8Array;
  headers?: Record<string, string>;
}

/** A request that gets no answer in this time is given up (and counted: a healthy server answers). */
const CALL_TIMEOUT_MS = 30_000;
/** Tokens are re-minted this often, so a long soak never presents an expired one. */
const TOKEN_TTL_MS = 30 * 60_000;

export class SoakClient {
  readonly statuses = new Map<number, number>();
  readonly anomalies: string[] = [];
  lost = 0;
  /** Calls given up unanswered: what was asked, and when it was sent. */
  readonly timedOut: Array<{ what: string; sentAt: number }> = [];
  private gate: Promise<void> = Promise.resolve();
  private openGate: () => void = () => undefined;
  private token: { value: string; at: number } | null = null;

  constructor(private readonly s: TestServer) {}

  /** Calls wait from now until `up()`. */
  down(): void {
    this.gate = new Promise((resolve) => (this.openGate = resolve));
  }

  up(): void {
    this.openGate();
  }

  async call(method: string, path: string, opts: CallOptions = {}): Promise<Outcome> {
    await this.gate;
    if (!this.token || Date.now() - this.token.at > TOKEN_TTL_MS) this.token = { value: await this.s.token(), at: Date.now() };
    const sentAt = Date.now();
    try {
      const res = await this.s.api(method, path, { ...opts, token: this.token.value, signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
      this.statuses.set(res.status, (this.statuses.get(res.status) ?? 0) + 1);
      if (res.status >= 500 && res.status !== 503) this.anomaly(`${method} ${path} answered ${res.status}: ${res.text.slice(0, 300)}`);
      return { answered: true, ...res };
    } catch (err) {
      const e = err as Error;
      if (e.name === 'TimeoutError') this.timedOut.push({ what: `${method} ${path}`, sentAt });
      else this.lost++;
      return { answered: false, error: `${e.message}${e.cause ? ` (${(e.cause as Error).message})` : ''}` };
    }
  }

  /** Calls until one is answered (the server may be restarting), then returns that answer. */
  async answered(method: string, path: string, opts: CallOptions = {}): Promise<Extract<Outcome, { answered: true }>> {
    for (;;) {
      const res = await this.call(method, path, opts);
      if (res.answered) return res;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  anomaly(what: string): void {
    this.anomalies.push(what);
  }

  /** `status×count` pairs, in status order, for the report. */
  tally(): string {
    return [...this.statuses].sort(([a], [b]) => a - b).map(([status, n]) => `${status}×${n}`).join(' ');
  }
}
