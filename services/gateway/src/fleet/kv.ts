import type { Clock } from "@unimatrix/service-kit/clock";
import type { Redis } from "ioredis";
import type { SharedStore } from "./shared";

// KEYS[1] = the value, KEYS[2] = its write-back stamp; ARGV = value, stamp, ttl ms. After a Redis
// restart each replica writes back what it knows; the one that knew it last (the highest stamp)
// wins, and a value written since in the ordinary way (no stamp) is never overwritten. 1 = written.
const WRITE_BACK = `
local stamp = redis.call('GET', KEYS[2])
if redis.call('EXISTS', KEYS[1]) == 1 and (stamp == false or tonumber(stamp) >= tonumber(ARGV[2])) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
`;

/**
 * Expiring string values shared by the fleet (Redis), kept in this replica's memory too — what it
 * wrote and what it read — so what this replica has served keeps working while Redis is
 * unreachable (an MCP session moved here from a dead replica included). Redis answers win while
 * it is up (a value deleted elsewhere is gone here too). When Redis comes back as another server
 * (it restarted empty), every replica writes back the values it knows, the freshest copy winning.
 */
export class SharedValues {
  /** `unsynced`: written while Redis was unreachable, so Redis does not know it yet. */
  /** `seen`: when this replica last wrote it or read it from Redis (how fresh its copy is). */
  readonly #local = new Map<string, { value: string; until: number; seen: number; unsynced: boolean }>();

  constructor(
    private readonly store: SharedStore,
    private readonly name: string,
    private readonly clock: Clock,
    /** Most values kept in memory; the oldest go first. */
    private readonly maxLocal = 10_000,
  ) {
    store.onRestart((redis) => this.#writeBack(redis));
  }

  /** Writes every value this replica knows back into a restarted (empty) Redis, unless a fresher copy is there. */
  async #writeBack(redis: Redis): Promise<void> {
    const now = this.clock.now().getTime();
    const pipeline = redis.pipeline();
    for (const [key, local] of this.#local) {
      if (local.until <= now) continue;
      pipeline.eval(WRITE_BACK, 2, this.#key(key), this.#stamp(key), local.value, local.seen, local.until - now);
      local.unsynced = false;
    }
    for (const [error] of (await pipeline.exec()) ?? []) if (error) throw error;
  }

  /** The value under `key`, or undefined when absent or expired. */
  async get(key: string): Promise<string | undefined> {
    return this.store.either(
      async (redis) => {
        const [[, value], [, ttl]] = (await redis.multi().get(this.#key(key)).pttl(this.#key(key)).exec()) as [
          [unknown, string | null],
          [unknown, number],
        ];
        if (value !== null) {
          // Remembered for an outage, for as long as Redis would keep it.
          if (ttl > 0) this.#setLocal(key, value, ttl);
          return value;
        }
        // Written here during an outage: Redis learns it now (what it deleted meanwhile stays deleted).
        const local = this.#local.get(key);
        if (!local?.unsynced || local.until <= this.clock.now().getTime()) {
          this.#local.delete(key);
          return undefined;
        }
        await redis
          .multi()
          .set(this.#key(key), local.value, "PX", local.until - this.clock.now().getTime())
          .del(this.#stamp(key))
          .exec();
        local.unsynced = false;
        return local.value;
      },
      () => this.#getLocal(key),
    );
  }

  /** Stores `value` under `key` for `ttlMs`. */
  async set(key: string, value: string, ttlMs: number): Promise<void> {
    const local = this.#setLocal(key, value, ttlMs);
    await this.store.either(
      async (redis) => void (await redis.multi().set(this.#key(key), value, "PX", ttlMs).del(this.#stamp(key)).exec()),
      () => {
        local.unsynced = true;
      },
    );
  }

  /** Extends `key`'s life to `ttlMs` from now. */
  async touch(key: string, ttlMs: number): Promise<void> {
    const local = this.#local.get(key);
    if (local) local.until = this.clock.now().getTime() + ttlMs;
    await this.store.either(
      async (redis) => void (await redis.pexpire(this.#key(key), ttlMs)),
      () => undefined,
    );
  }

  /** Removes `key`. */
  async delete(key: string): Promise<void> {
    this.#local.delete(key);
    await this.store.either(
      async (redis) => void (await redis.del(this.#key(key), this.#stamp(key))),
      () => undefined,
    );
  }

  #getLocal(key: string): string | undefined {
    const local = this.#local.get(key);
    if (!local) return undefined;
    if (local.until <= this.clock.now().getTime()) {
      this.#local.delete(key);
      return undefined;
    }
    return local.value;
  }

  #setLocal(key: string, value: string, ttlMs: number) {
    this.#local.delete(key);
    if (this.#local.size >= this.maxLocal) {
      const oldest = this.#local.keys().next().value;
      if (oldest !== undefined) this.#local.delete(oldest);
    }
    const now = this.clock.now().getTime();
    const entry = { value, until: now + ttlMs, seen: now, unsynced: false };
    this.#local.set(key, entry);
    return entry;
  }

  #key(key: string): string {
    return `${this.store.prefix}${this.name}:${key}`;
  }

  /** The stamp a write-back leaves beside the value (how fresh the written copy was). */
  #stamp(key: string): string {
    return `${this.#key(key)}#written-back`;
  }
}
