import { ResourceExhaustedError } from "@unimatrix/service-kit/errors";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import type { SharedStore } from "./fleet/shared";

/**
 * Per-credential (and per-address) request limits counted across every gateway replica in Redis
 * (`rate-limiter-flexible`). Each key may spend `burst` requests per window of `burst / rate`
 * seconds, so the sustained rate is `ratePerSecond`. While Redis is unreachable an in-memory
 * insurance limiter with the same settings counts on this replica, and `onFallback` is told.
 */
export class RateLimiter {
  readonly #limiter: RateLimiterRedis | RateLimiterMemory | undefined;

  constructor(
    ratePerSecond: number,
    burst: number,
    store?: SharedStore,
    private readonly onFallback?: () => void,
  ) {
    if (ratePerSecond <= 0) return;
    const settings = { points: burst, duration: Math.max(1, Math.ceil(burst / ratePerSecond)) };
    if (!store?.redis) {
      this.#limiter = new RateLimiterMemory({ ...settings, keyPrefix: "rl" });
      return;
    }
    const insurance = new RateLimiterMemory({ ...settings, keyPrefix: "rl" });
    const consume = insurance.consume.bind(insurance);
    // Counted only while Redis is unreachable: say so each time (a metric), never refuse everything.
    insurance.consume = (key, points, options) => {
      this.onFallback?.();
      return consume(key, points, options);
    };
    this.#limiter = new RateLimiterRedis({
      ...settings,
      storeClient: store.redis,
      keyPrefix: `${store.prefix}rl`,
      rejectIfRedisNotReady: true,
      insuranceLimiter: insurance,
    });
  }

  /** Spends one request of `key`; false when its window is spent (the caller answers 429). */
  async take(key: string): Promise<boolean> {
    if (!this.#limiter) return true;
    try {
      await this.#limiter.consume(key);
      return true;
    } catch (error) {
      if (error instanceof RateLimiterRes) return false;
      throw error;
    }
  }
}

/**
 * Charges one lookup of a token not in the auth cache to its `<kind>_<lookup>` part (not to the
 * address it came from): repeated guesses at one credential are limited, and garbage tokens from
 * an address shared with others (NAT, an untrusted proxy) never block another's valid token.
 */
export async function chargeLookup(limiter: RateLimiter, lookup: string): Promise<void> {
  if (!(await limiter.take(`lookup:${lookup}`))) {
    throw new ResourceExhaustedError("too many attempts with this credential; slow down");
  }
}
