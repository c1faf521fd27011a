import { ServiceError } from '../errors.js';

/**
 * Per-signing-key request rate limit (`REPOHOST_KEY_RATE_LIMIT` requests per second; 0 = off):
 * a token bucket per key holding one second of burst.
 */
export class KeyRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly perSecond: number) {}

  take(keyId: string): void {
    if (this.perSecond <= 0) return;
    const now = Date.now();
    const bucket = this.buckets.get(keyId) ?? { tokens: this.perSecond, at: now };
    bucket.tokens = Math.min(this.perSecond, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond);
    bucket.at = now;
    if (bucket.tokens < 1) {
      this.buckets.set(keyId, bucket);
      throw new ServiceError('RATE_LIMITED', 'request rate over this key\'s limit', undefined, { retryAfter: 1 });
    }
    bucket.tokens -= 1;
    this.buckets.set(keyId, bucket);
  }
}
