import type { Clock } from "@unimatrix/service-kit/clock";
import type { SharedStore } from "./shared";

/**
 * Expiring string values shared by the fleet (Redis), kept in this replica's memory too — what it
 * wrote and what it read — so what this replica has served keeps working while Redis is
 * unreachable (an MCP session moved here from a dead replica included). Redis answers win while
 * it is up (a value deleted elsewhere is gone here too).
 */
export class SharedValues {
  /** `unsynced`: written while Redis was unreachable, so Redis does not know it yet. */
  readonly #local = new Map<string, { value: string; until: number; unsynced: boolean }>();

  constructor(
    private readonly store: SharedStore,
    private readonly name: string,
    private readonly clock: Clock,
    /** Most values kept in memory; the oldest go first. */
    private readonly maxLocal = 10_000,
  ) {}

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
        await redis.set(this.#key(key), local.value, "PX", local.until - this.clock.now().getTime());
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
      async (redis) => void (await redis.set(this.#key(key), value, "PX", ttlMs)),
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
      async (redis) => void (await redis.del(this.#key(key))),
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
    const entry = { value, until: this.clock.now().getTime() + ttlMs, unsynced: false };
    this.#local.set(key, entry);
    return entry;
  }

  #key(key: string): string {
    return `${this.store.prefix}${this.name}:${key}`;
  }
}
