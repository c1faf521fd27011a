import type { KeyObject } from 'node:crypto';
import type { Agent, Dispatcher } from 'undici';
import type { SecretBox } from '../../../storage/secret-box.js';
import { AttemptDeadlines, type Deadline } from './attempt-deadlines.js';
import type { Clock } from './clock.js';
import { AddressRefusedError, createWebhookAgent } from './outbound-agent.js';
import type { DeliveryRecord, WebhookTargetRecord } from '../../../storage/webhook-store.js';
import { classifyStatus, parseRetryAfter, type Verdict } from './retry-policy.js';
import { DeliveryHeaders, signatureHeader, signingKey } from './signature.js';

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
  private readonly headers: DeliveryHeaders;
  private readonly secretCache = new Map<string, { sealed: string; key: KeyObject }>();
  private readonly endpoints = new Map<string, Endpoint>();

  constructor(private readonly opts: HttpDeliveryOptions) {
    this.agent = createWebhookAgent(opts.allowPrivate, opts.timeoutMs);
    this.deadlines = new AttemptDeadlines(opts.timeoutMs);
    this.headers = new DeliveryHeaders(opts.brand);
  }

  /** `body` is `record.body` as bytes (`PendingDelivery.body`). */
  async send(target: WebhookTargetRecord, record: DeliveryRecord, body: Buffer): Promise<AttemptResult> {
    let key: KeyObject;
    try {
      key = this.keyOf(target);
    } catch {
      return { verdict: 'permanent', statusCode: null, error: 'the target secret cannot be opened with this data directory key', retryAfterMs: null };
    }
    const { clock, timeoutMs } = this.opts;
    const signature = signatureHeader(key, body, Math.floor(clock.now() / 1000));
    const headers = this.headers.of(record.event_type, record.id, signature);
    const deadline = this.deadlines.next();
    const outcome = await exchange(this.agent, this.endpointOf(target), headers, body, deadline, timeoutMs);
    if ('status' in outcome) {
      const verdict = classifyStatus(outcome.status);
      return {
        verdict,
        statusCode: outcome.status,
        error: verdict === 'succeeded' ? null : `the receiver answered HTTP ${outcome.status}`,
        retryAfterMs: verdict === 'transient' ? parseRetryAfter(outcome.retryAfter, clock.now()) : null,
      };
    }
    // undici's own header and body timers (set to the same bound, a backstop) may fire first.
    if (deadline.timedOut || answerTimedOut(outcome.error)) return { verdict: 'transient', statusCode: null, error: `no answer within ${timeoutMs / 1000} s`, retryAfterMs: null };
    const refused = findRefusal(outcome.error);
    if (refused) return { verdict: 'permanent', statusCode: null, error: `address refused: ${refused.message}`, retryAfterMs: null };
    return { verdict: 'transient', statusCode: null, error: connectionFailure(outcome.error), retryAfterMs: null };
  }

  /** Cuts the attempts under way short (they end as transient failures) and refuses new ones. */
  shutdown(): void {
    this.deadlines.shutdown();
  }

  async close(): Promise<void> {
    await this.agent.destroy().catch(() => undefined);
  }

  /** The target's URL as undici's dispatch takes it, parsed once per URL. */
  private endpointOf(target: WebhookTargetRecord): Endpoint {
    const cached = this.endpoints.get(target.id);
    if (cached?.url === target.url) return cached;
    const url = new URL(target.url);
    const endpoint = { url: target.url, origin: url.origin, path: `${url.pathname}${url.search}` };
    this.endpoints.set(target.id, endpoint);
    return endpoint;
  }

  /** The target's secret as an HMAC key, opened and prepared once per secret. */
  private keyOf(target: WebhookTargetRecord): KeyObject {
    const cached = this.secretCache.get(target.id);
    if (cached?.sealed === target.sealed_secret) return cached.key;
    const key = signingKey(this.opts.secrets.open(target.sealed_secret));
    this.secretCache.set(target.id, { sealed: target.sealed_secret, key });
    return key;
  }
}

interface Endpoint {
  url: string;
  origin: string;
  path: string;
}

/** An answer's body is not needed; more than this of it is not read (the connection is dropped). */
const MAX_ANSWER_BYTES = 64 * 1024;

type Answer = { status: number; retryAfter: string | string[] | undefined };
type Outcome = Answer | { error: unknown };

const answerTimedOut = (err: unknown): boolean => {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
};

/**
 * One POST on undici's dispatch API: no response stream or promise wrapper per request, which the
 * `request` API costs (about 70 µs of CPU per request here), for an answer of which only the
 * status and Retry-After are read. Ends with the status once the answer's body is read (or its
 * first MAX_ANSWER_BYTES), or with the error that ended it, or when the deadline passes.
 */
function exchange(dispatcher: Dispatcher, endpoint: Endpoint, headers: string[], body: Buffer, deadline: Deadline, timeoutMs: number): Promise<Outcome> {
  return new Promise((resolve) => {
    const handler = new ExchangeHandler(deadline, resolve);
    if (handler.settled) return;
    dispatcher.dispatch({ origin: endpoint.origin, path: endpoint.path, method: 'POST', headers, body, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }, handler);
  });
}

/** The handler of one exchange: its callbacks are methods, not a closure each per attempt. */
class ExchangeHandler implements Dispatcher.DispatchHandler {
  settled = false;
  private answer: Answer | null = null;
  private read = 0;
  private controller: Dispatcher.DispatchController | null = null;
  private unwatch: (() => void) | null = null;

  constructor(
    private readonly deadline: Deadline,
    private readonly resolve: (outcome: Outcome) => void,
  ) {
    // Called at once when the deadline has passed already, which settles the exchange.
    const unwatch = deadline.watch(() => this.expire());
    if (!this.settled) this.unwatch = unwatch;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.settled) controller.abort(new Error('the attempt has ended'));
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    if (statusCode >= 200) this.answer = { status: statusCode, retryAfter: headers['retry-after'] };
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.read += chunk.length;
    if (this.read <= MAX_ANSWER_BYTES || !this.answer) return;
    this.settle(this.answer);
    controller.abort(new Error('answer body too large'));
  }

  onResponseEnd(): void {
    this.settle(this.answer ?? { error: new Error('no final answer') });
  }

  onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
    // An answer whose body then failed is still that answer.
    this.settle(this.answer ?? { error });
  }

  private expire(): void {
    const reason = this.deadline.signal.reason as Error;
    this.controller?.abort(reason);
    this.settle({ error: reason });
  }

  private settle(outcome: Outcome): void {
    if (this.settled) return;
    this.settled = true;
    this.unwatch?.();
    this.resolve(outcome);
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
