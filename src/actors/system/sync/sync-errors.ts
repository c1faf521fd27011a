import { STATUS_CODES } from 'node:http';
import { asServiceError } from '../../../errors.js';

/**
 * How a failed sync try is judged (API §9): transient failures (network, timeouts, remote 5xx,
 * 408/429) go back to the queue with a backoff; everything else fails the sync at once. Every
 * message that leaves here has the upstream credentials redacted, whatever produced it, and none
 * carries bytes the upstream sent (API §9 `error`).
 */
export class SyncFailure extends Error {
  constructor(
    message: string,
    readonly transient: boolean,
  ) {
    super(message);
    this.name = 'SyncFailure';
  }
}

/** The remote answered something that is not the git protocol we speak. */
export class GitProtocolError extends SyncFailure {
  constructor(message: string) {
    super(message, false);
    this.name = 'GitProtocolError';
  }
}

export interface FailureVerdict {
  message: string;
  transient: boolean;
}

const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ERR_STREAM_PREMATURE_CLOSE',
]);

const REDACTED = '[redacted]';

/** Replaces every credential (raw, URL-encoded, base64 of the Basic pair) and any URL userinfo. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text.replace(/(\b[a-z][a-z0-9+.-]*:\/\/)[^/\s@]*@/gi, `$1${REDACTED}@`);
  for (const secret of secrets) {
    if (!secret) continue;
    for (const form of new Set([secret, encodeURIComponent(secret)])) out = out.split(form).join(REDACTED);
  }
  return out;
}

/** Our words for a status: the reason phrase is the standard one, never what the upstream sent. */
function httpVerdict(status: number): FailureVerdict {
  const reason = STATUS_CODES[status];
  const what = `HTTP ${status}${reason ? ` ${reason}` : ''}`;
  if (status === 401) return { message: `the upstream refused the credentials (${what})`, transient: false };
  if (status === 403) return { message: `the upstream denied access (${what})`, transient: false };
  if (status === 404) return { message: `upstream repository not found (${what})`, transient: false };
  if (status === 408 || status === 429 || status >= 500) return { message: `the upstream is unavailable (${what})`, transient: true };
  return { message: `the upstream answered ${what}`, transient: false };
}

/** The upstream answered a git request with a status other than 200. */
export class UpstreamStatusError extends SyncFailure {
  constructor(readonly status: number) {
    const verdict = httpVerdict(status);
    super(verdict.message, verdict.transient);
    this.name = 'UpstreamStatusError';
  }
}

/**
 * Our description of a failure. Only our own texts are kept (SyncFailure, ServiceError); anything
 * else is described by its error code, because the messages of transport and parser errors can
 * quote what the upstream sent (a certificate's names, a response's bytes).
 */
export function classifyFailure(err: unknown, secrets: readonly string[]): FailureVerdict {
  let verdict: FailureVerdict;
  const code = (err as { code?: unknown } | null)?.code;
  const known = asServiceError(err);
  if (err instanceof SyncFailure) verdict = { message: err.message, transient: err.transient };
  else if (known) verdict = { message: `sync failed: ${known.message}`, transient: known.retryable };
  else if (typeof code !== 'string') verdict = { message: 'sync failed: internal error', transient: false };
  else if (TRANSIENT_CODES.has(code)) verdict = { message: `cannot reach the upstream (${code})`, transient: true };
  else if (code === 'ENOTFOUND') {
    const host = (err as { hostname?: unknown }).hostname;
    verdict = { message: `the upstream host ${typeof host === 'string' ? `${host} ` : ''}does not resolve (ENOTFOUND)`, transient: false };
  } else if (code === 'ERR_INVALID_URL') verdict = { message: 'invalid upstream url', transient: false };
  else if (code.startsWith('HPE_')) verdict = { message: `the upstream's answer is not valid HTTP (${code})`, transient: false };
  else if (/CERT|TLS|SSL/.test(code)) verdict = { message: `the TLS connection to the upstream failed (${code})`, transient: false };
  else verdict = { message: `sync failed (${code})`, transient: false };
  return { message: redact(verdict.message, secrets), transient: verdict.transient };
}
