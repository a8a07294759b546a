import type { Clock } from "@unimatrix/service-kit";

/** Per-credential token buckets: `ratePerSecond` sustained, `burst` at once. */
export class RateLimiter {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    private readonly clock: Clock,
    private readonly maxKeys = 100_000,
  ) {}

  /** Takes one token for `key`; false when the bucket is empty (the caller answers 429). */
  take(key: string): boolean {
    if (this.ratePerSecond <= 0) return true;
    const now = this.clock.now().getTime();
    const bucket = this.#buckets.get(key) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.ratePerSecond);
    bucket.at = now;
    if (!this.#buckets.has(key)) {
      if (this.#buckets.size >= this.maxKeys) this.#buckets.delete(this.#buckets.keys().next().value!);
      this.#buckets.set(key, bucket);
    }
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }
}
