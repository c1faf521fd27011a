/**
 * How a failed sync try is judged (API §9): transient failures (network, timeouts, remote 5xx,
 * 408/429) go back to the queue with a backoff; everything else fails the sync at once. Every
 * message that leaves here has the upstream credentials redacted, whatever produced it.
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
  'UND_ERR_SOCKET',
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

interface HttpErrorLike {
  code: 'HttpError';
  data: { statusCode: number; statusMessage?: string };
}

function isHttpError(err: unknown): err is HttpErrorLike {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'HttpError' && typeof (err as HttpErrorLike).data?.statusCode === 'number';
}

function httpVerdict(status: number, statusMessage: string | undefined): FailureVerdict {
  const what = `HTTP ${status}${statusMessage ? ` ${statusMessage}` : ''}`;
  if (status === 401) return { message: `the upstream refused the credentials (${what})`, transient: false };
  if (status === 403) return { message: `the upstream denied access (${what})`, transient: false };
  if (status === 404) return { message: `upstream repository not found (${what})`, transient: false };
  if (status === 408 || status === 429 || status >= 500) return { message: `the upstream is unavailable (${what})`, transient: true };
  return { message: `the upstream answered ${what}`, transient: false };
}

export function classifyFailure(err: unknown, secrets: readonly string[]): FailureVerdict {
  let verdict: FailureVerdict;
  if (err instanceof SyncFailure) verdict = { message: err.message, transient: err.transient };
  else if (isHttpError(err)) verdict = httpVerdict(err.data.statusCode, err.data.statusMessage);
  else {
    const code = (err as { code?: unknown } | null)?.code;
    const message = err instanceof Error ? err.message : String(err);
    if (typeof code === 'string' && TRANSIENT_CODES.has(code)) verdict = { message: `cannot reach the upstream (${code}: ${message})`, transient: true };
    else if (code === 'ENOTFOUND') verdict = { message: `the upstream host does not resolve (${message})`, transient: false };
    else if (code === 'UrlParseError' || code === 'UnknownTransportError' || code === 'ERR_INVALID_URL') verdict = { message: `invalid upstream url (${message})`, transient: false };
    else if (code === 'SmartHttpError' || code === 'ParseError' || code === 'EmptyServerResponseError') {
      verdict = { message: `the upstream did not answer as a git smart-HTTP server (${message})`, transient: false };
    } else verdict = { message: `sync failed: ${message}`, transient: false };
  }
  return { message: redact(verdict.message, secrets), transient: verdict.transient };
}
