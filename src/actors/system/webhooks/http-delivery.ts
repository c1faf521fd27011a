import { request, type Agent } from 'undici';
import type { SecretBox } from '../../../storage/secret-box.js';
import { AttemptDeadlines } from './attempt-deadlines.js';
import type { Clock } from './clock.js';
import { AddressRefusedError, createWebhookAgent } from './outbound-agent.js';
import type { DeliveryRecord, WebhookTargetRecord } from './records.js';
import { classifyStatus, parseRetryAfter, type Verdict } from './retry-policy.js';
import { deliveryHeaders, signatureHeader } from './signature.js';

/** HTTP delivery (API §11.3): one signed POST of a delivery's body to its target, and its verdict. */
export interface AttemptResult {
  verdict: Verdict;
  statusCode: number | null;
  error: string | null;
  retryAfterMs: number | null;
}

export interface HttpDeliveryOptions {
  secrets: SecretBox;
  brand: string;
  allowPrivate: boolean;
  /** An attempt that has no answer within this is a transient failure. */
  timeoutMs: number;
  clock: Clock;
}

export class HttpDelivery {
  private readonly agent: Agent;
  private readonly deadlines: AttemptDeadlines;
  private readonly secretCache = new Map<string, { sealed: string; secret: string }>();

  constructor(private readonly opts: HttpDeliveryOptions) {
    this.agent = createWebhookAgent(opts.allowPrivate, opts.timeoutMs);
    this.deadlines = new AttemptDeadlines(opts.timeoutMs);
  }

  async send(target: WebhookTargetRecord, record: DeliveryRecord): Promise<AttemptResult> {
    let secret: string;
    try {
      secret = this.secretOf(target);
    } catch {
      return { verdict: 'permanent', statusCode: null, error: 'the target secret cannot be opened with this data directory key', retryAfterMs: null };
    }
    const { clock, timeoutMs } = this.opts;
    const signature = signatureHeader(secret, record.body, Math.floor(clock.now() / 1000));
    const headers = deliveryHeaders(this.opts.brand, record.event_type, record.id, signature);
    const signal = this.deadlines.next();
    try {
      const res = await request(target.url, {
        method: 'POST',
        headers,
        body: record.body,
        dispatcher: this.agent,
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      // The answer's body is not needed; reading (a bounded part of) it frees the connection.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      const verdict = classifyStatus(res.statusCode);
      return {
        verdict,
        statusCode: res.statusCode,
        error: verdict === 'succeeded' ? null : `the receiver answered HTTP ${res.statusCode}`,
        retryAfterMs: verdict === 'transient' ? parseRetryAfter(res.headers['retry-after'], clock.now()) : null,
      };
    } catch (err) {
      if (AttemptDeadlines.timedOut(signal)) return { verdict: 'transient', statusCode: null, error: `no answer within ${timeoutMs / 1000} s`, retryAfterMs: null };
      const refused = findRefusal(err);
      if (refused) return { verdict: 'permanent', statusCode: null, error: `address refused: ${refused.message}`, retryAfterMs: null };
      return { verdict: 'transient', statusCode: null, error: connectionFailure(err), retryAfterMs: null };
    }
  }

  /** Cuts the attempts under way short (they end as transient failures) and refuses new ones. */
  shutdown(): void {
    this.deadlines.shutdown();
  }

  async close(): Promise<void> {
    await this.agent.destroy().catch(() => undefined);
  }

  private secretOf(target: WebhookTargetRecord): string {
    const cached = this.secretCache.get(target.id);
    if (cached?.sealed === target.sealed_secret) return cached.secret;
    const secret = this.opts.secrets.open(target.sealed_secret);
    this.secretCache.set(target.id, { sealed: target.sealed_secret, secret });
    return secret;
  }
}

/**
 * `last_error` for an attempt that got no status (API §11.4): described by the error's code,
 * never by its message, which can quote the receiver's answer (a parser error's bytes).
 */
function connectionFailure(err: unknown): string {
  if ((err as Error | null)?.name === 'HTTPParserError') return "the receiver's answer is not valid HTTP";
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? `connection failed: ${code}` : 'connection failed';
}

function findRefusal(err: unknown): AddressRefusedError | null {
  for (let e = err; e; e = (e as { cause?: unknown }).cause) {
    if (e instanceof AddressRefusedError) return e;
  }
  return null;
}
