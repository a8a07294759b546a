import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import type { Logger } from "pino";
import { LocalStreamCounter, type StreamCounter } from "./limiter";

// KEYS[1] = the key's set; ARGV = member, limit, lease ms. Scores are expiry times in Redis's own
// clock (TIME), so replicas with skewed clocks agree. Drops expired members, then adds `member`
// unless `limit` others hold a place. 1 = added, 0 = refused.
const ACQUIRE = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`;

// KEYS[1] = the key's set; ARGV = lease ms, members... Extends (or re-adds, after an outage) them.
const RENEW = `
local t = redis.call('TIME')
local expiry = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], expiry, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`;

// KEYS[1] = the key's set. Members whose lease has not run out.
const COUNT = `
local t = redis.call('TIME')
return redis.call('ZCOUNT', KEYS[1], '(' .. (t[1] * 1000 + math.floor(t[2] / 1000)), '+inf')
`;

/** Options of the fleet-wide counter. */
export interface RedisStreamCounterOptions {
  readonly url: string;
  /** The installation's prefix (`UMX_BUS_PREFIX`); keys are `<prefix>:<name>:<key>`. */
  readonly prefix: string;
  /** What is counted, in the key (e.g. `presence:watch`). */
  readonly name: string;
  /** How long a replica's place lasts unless renewed (renewed every third): a dead replica's streams free themselves within it. */
  readonly leaseMs?: number;
  readonly logger?: Logger;
}

/** What the counter has done since it opened (for metrics). */
export interface FleetCounterStats {
  /** Decisions taken from this replica's own count because Redis could not be asked. */
  readonly localFallbacks: number;
  /** True while Redis cannot be asked (the cap holds per replica meanwhile). */
  readonly degraded: boolean;
}

/**
 * Open streams per key counted across every replica in Redis: one sorted-set member per stream,
 * scored with its expiry and renewed by its replica, so the streams of a replica that died stop
 * counting within `leaseMs`. While Redis is unreachable the counter decides from this replica's
 * own streams (it never refuses everything), logs that once per outage and counts it; when Redis
 * is back the renewal writes those streams in too.
 */
export class RedisStreamCounter implements StreamCounter {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #leaseMs: number;
  readonly #logger: Logger | undefined;
  readonly #replica = randomUUID();
  /** This replica's members per key (counted in Redis or, while it is down, only here). */
  readonly #members = new Map<string, Set<string>>();
  readonly #renewal: NodeJS.Timeout;
  #seq = 0;
  #fallbacks = 0;
  #degraded = false;

  constructor(options: RedisStreamCounterOptions) {
    this.#prefix = `${options.prefix}:${options.name}:`;
    this.#leaseMs = options.leaseMs ?? 10_000;
    this.#logger = options.logger;
    this.#redis = new Redis(options.url, {
      lazyConnect: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // A black-holed connection must not hold a stream's start: give up and count locally.
      commandTimeout: 500,
      connectTimeout: 2_000,
      retryStrategy: (attempt: number) => Math.min(50 * 2 ** attempt, 2_000),
      connectionName: `${options.prefix}-${options.name}-streams`,
    });
    this.#redis.on("error", (error: Error) => this.#logger?.debug({ err: error }, "stream counter redis error"));
    this.#redis.on("ready", () => {
      if (this.#degraded) this.#logger?.info("fleet-wide stream caps are back (Redis reachable)");
      this.#degraded = false;
      void this.renew();
    });
    this.#renewal = setInterval(() => void this.renew(), Math.max(100, Math.floor(this.#leaseMs / 3)));
    this.#renewal.unref();
  }

  async tryAdd(key: string, limit: number): Promise<boolean> {
    const member = `${this.#replica}:${++this.#seq}`;
    const mine = this.#mine(key);
    const added = await this.#shared(
      async (redis) => (await redis.eval(ACQUIRE, 1, this.#prefix + key, member, limit, this.#leaseMs)) === 1,
      () => mine.size < limit,
    );
    if (added) mine.add(member);
    else if (mine.size === 0) this.#members.delete(key);
    return added;
  }

  async remove(key: string): Promise<void> {
    const mine = this.#members.get(key);
    const member = mine?.values().next().value;
    if (!mine || member === undefined) return;
    mine.delete(member);
    if (mine.size === 0) this.#members.delete(key);
    await this.#shared(
      async (redis) => void (await redis.zrem(this.#prefix + key, member)),
      () => undefined,
    );
  }

  async count(key: string): Promise<number> {
    return this.#shared(
      async (redis) => Number(await redis.eval(COUNT, 1, this.#prefix + key)),
      () => this.#members.get(key)?.size ?? 0,
    );
  }

  /** Extends this replica's places (runs every third of the lease, and when Redis comes back). */
  async renew(): Promise<void> {
    if (this.#redis.status !== "ready") return;
    try {
      const pipeline = this.#redis.pipeline();
      for (const [key, members] of this.#members) {
        pipeline.eval(RENEW, 1, this.#prefix + key, this.#leaseMs, ...members);
      }
      for (const [error] of (await pipeline.exec()) ?? []) if (error) throw error;
    } catch (error) {
      this.#logger?.warn({ err: error }, "stream counter renewal failed");
    }
  }

  /** Counters since the counter opened. */
  stats(): FleetCounterStats {
    return { localFallbacks: this.#fallbacks, degraded: this.#degraded || this.#redis.status !== "ready" };
  }

  /** Stops renewing and gives this replica's places back (best effort). */
  async close(): Promise<void> {
    clearInterval(this.#renewal);
    if (this.#redis.status === "ready") {
      const pipeline = this.#redis.pipeline();
      for (const [key, members] of this.#members) pipeline.zrem(this.#prefix + key, ...members);
      await pipeline.exec().catch(() => {});
    }
    this.#members.clear();
    this.#redis.disconnect();
  }

  #mine(key: string): Set<string> {
    let mine = this.#members.get(key);
    if (!mine) {
      mine = new Set();
      this.#members.set(key, mine);
    }
    return mine;
  }

  async #shared<T>(shared: (redis: Redis) => Promise<T>, local: () => T): Promise<T> {
    if (this.#redis.status === "ready") {
      try {
        return await shared(this.#redis);
      } catch (error) {
        this.#fallback(error);
        return local();
      }
    }
    this.#fallback(undefined);
    return local();
  }

  #fallback(error: unknown): void {
    this.#fallbacks += 1;
    if (this.#degraded) return;
    this.#degraded = true;
    this.#logger?.warn(
      { err: error },
      "fleet-wide stream caps unavailable (Redis down): counting this replica's streams only",
    );
  }
}

/**
 * The stream counter a service should use: fleet-wide in Redis when `url` is set, this replica's
 * memory otherwise (the embedded default is one process).
 */
export function openStreamCounter(options: Omit<RedisStreamCounterOptions, "url"> & { url: string | undefined }) {
  const { url, ...rest } = options;
  return url ? new RedisStreamCounter({ url, ...rest }) : new LocalStreamCounter();
}
