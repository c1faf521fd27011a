import type { DeliveryStatus } from '../../../storage/webhook-store.js';

/**
 * When a delivery is tried again (API §11.3): transient failures (network, timeout, 408, 429,
 * 5xx) wait base × these multipliers, ±20 % jitter, or a longer Retry-After; the 12th failed
 * attempt is final. Any other non-2xx answer is final at once.
 */
export const RETRY_MULTIPLIERS = [1, 3, 12, 60, 180, 360, 720, 720, 720, 720, 720] as const;
export const MAX_ATTEMPTS = RETRY_MULTIPLIERS.length + 1;
/** A Retry-After beyond this is taken as this: one receiver must not park a lane for days. */
const MAX_RETRY_AFTER_MS = 24 * 3600 * 1000;

export type Verdict = 'succeeded' | 'transient' | 'permanent';

export function classifyStatus(status: number): Verdict {
  if (status >= 200 && status < 300) return 'succeeded';
  if (status === 408 || status === 429 || status >= 500) return 'transient';
  return 'permanent';
}

/** The wait after the `attempts`-th attempt failed transiently (attempts ≥ 1), before Retry-After. */
export function retryDelayMs(attempts: number, baseMs: number, random: () => number = Math.random): number {
  const multiplier = RETRY_MULTIPLIERS[Math.min(attempts, RETRY_MULTIPLIERS.length) - 1]!;
  return Math.round(baseMs * multiplier * (0.8 + 0.4 * random()));
}

/**
 * Where a delivery stands after its `attempts`-th attempt ended with `verdict`: its status, and
 * when it is tried again (null once it is final).
 */
export function afterAttempt(
  verdict: Verdict,
  attempts: number,
  retryAfterMs: number | null,
  baseMs: number,
  now: number,
): { status: DeliveryStatus; nextAt: number | null } {
  if (verdict === 'succeeded') return { status: 'succeeded', nextAt: null };
  if (verdict === 'permanent' || attempts >= MAX_ATTEMPTS) return { status: 'failed', nextAt: null };
  return { status: 'pending', nextAt: now + Math.max(retryDelayMs(attempts, baseMs), retryAfterMs ?? 0) };
}

/** Retry-After as milliseconds from `now` (delay-seconds or an HTTP date); null when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | null {
  const raw = Array.isArray(value) ? value[0] : value;
  if (!raw) return null;
  const trimmed = raw.trim();
  let ms: number;
  if (/^\d+$/.test(trimmed)) ms = Number(trimmed) * 1000;
  else {
    const at = Date.parse(trimmed);
    if (Number.isNaN(at)) return null;
    ms = at - now;
  }
  return Math.min(Math.max(0, ms), MAX_RETRY_AFTER_MS);
}
