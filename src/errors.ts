import { VcsError, type VcsErrorKind } from './vcs/errors.js';

/**
 * The one error type of the service. Every failure that reaches a client is a ServiceError with a
 * stable code from the registry below; the HTTP status is looked up here and nowhere else. Errors
 * cross worker threads as plain data (`toJSON`/`fromJSON`), so `instanceof` is not relied upon
 * across realms: `isServiceError` checks a registered symbol marker instead.
 */
export const ERROR_STATUS = {
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  JWT_UNKNOWN_PUBLIC_KEY: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  REPO_NOT_FOUND: 404,
  BRANCH_NOT_FOUND: 404,
  CHANGE_NOT_FOUND: 404,
  COMMIT_NOT_FOUND: 404,
  FILE_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  NOT_ACCEPTABLE: 406,
  REPO_EXISTS: 409,
  BRANCH_EXISTS: 409,
  MERGE_CONFLICT: 409,
  BOOKMARK_MOVE_HISTORY_REWRITE: 409,
  ABORTED: 409,
  PAYLOAD_TOO_LARGE: 413,
  QUOTA_EXCEEDED: 413,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export const isErrorCode = (code: string): code is ErrorCode => Object.hasOwn(ERROR_STATUS, code);

export type ErrorDetails = Record<string, unknown>;

export interface ServiceErrorData {
  code: ErrorCode;
  message: string;
  details?: ErrorDetails;
  retryable?: boolean;
  /** Seconds a client should wait (429/503). */
  retryAfter?: number;
}

const MARK = Symbol.for('repohost.ServiceError');

export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails | undefined;
  readonly retryable: boolean;
  readonly retryAfter: number | undefined;
  readonly [MARK] = true;

  constructor(code: ErrorCode, message: string, details?: ErrorDetails, opts: { retryable?: boolean; retryAfter?: number } = {}) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.details = details;
    this.retryable = opts.retryable ?? (code === 'RATE_LIMITED' || code === 'UNAVAILABLE');
    this.retryAfter = opts.retryAfter;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }

  /** The error as plain data, for another thread; `fromJSON` rebuilds it there, retryable as it was. */
  toJSON(): ServiceErrorData {
    const data: ServiceErrorData = { code: this.code, message: this.message, retryable: this.retryable };
    if (this.details !== undefined) data.details = this.details;
    if (this.retryAfter !== undefined) data.retryAfter = this.retryAfter;
    return data;
  }

  static fromJSON(data: ServiceErrorData): ServiceError {
    return new ServiceError(data.code, data.message, data.details, { retryable: data.retryable, retryAfter: data.retryAfter });
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[MARK] === true;
  }
}

export function isServiceError(value: unknown): value is ServiceError {
  return value instanceof ServiceError;
}

/** The code each failure of the change model (src/vcs/errors.ts) has for a client. */
const VCS_ERROR_CODES: Record<VcsErrorKind, ErrorCode> = {
  'invalid-path': 'INVALID_REQUEST',
  'invalid-edit': 'INVALID_REQUEST',
  'missing-path': 'FILE_NOT_FOUND',
  'invalid-resolution': 'INVALID_REQUEST',
  conflict: 'MERGE_CONFLICT',
  corrupt: 'INTERNAL_ERROR',
  'invalid-request': 'INVALID_REQUEST',
  'change-not-found': 'CHANGE_NOT_FOUND',
  'bookmark-not-found': 'BRANCH_NOT_FOUND',
  'bookmark-exists': 'BRANCH_EXISTS',
  stale: 'ABORTED',
  'history-rewrite': 'BOOKMARK_MOVE_HISTORY_REWRITE',
};

/**
 * A failure as a client is told of it: a ServiceError as it is, a model error by its kind, and
 * undefined for anything else (a bug or a lost resource: the caller logs it and answers 500).
 * Every place where errors leave for a client or for another thread goes through here.
 */
export function asServiceError(err: unknown): ServiceError | undefined {
  if (isServiceError(err)) return err;
  if (err instanceof VcsError) return new ServiceError(VCS_ERROR_CODES[err.kind], err.message, err.details);
  return undefined;
}

/** Shorthands for the most common failures, so call sites read as sentences. */
export const invalid = (message: string, details?: ErrorDetails): ServiceError => new ServiceError('INVALID_REQUEST', message, details);
export const notFound = (code: Extract<ErrorCode, `${string}NOT_FOUND`>, message: string, details?: ErrorDetails): ServiceError =>
  new ServiceError(code, message, details);
export const aborted = (message: string, details?: ErrorDetails): ServiceError => new ServiceError('ABORTED', message, details);
/** An Idempotency-Key repeated with another request (API §1). */
export const keyReused = (): ServiceError => aborted('Idempotency-Key was already used with a different request');
/** A write LMDB could not commit (disk or map full, I/O error), or one refused before it starts. */
export const storageUnavailable = (message = 'storage is unavailable, retry later'): ServiceError => new ServiceError('UNAVAILABLE', message, undefined, { retryAfter: 1 });
