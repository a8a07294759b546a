import type { Clock } from "@unimatrix/service-kit/clock";
import type { Redis } from "ioredis";
import type { SharedStore } from "./shared";

// KEYS[1] = the set; ARGV = now, expiry, member, max, key ttl (ms). Drops expired members, then
// adds `member` if it is already there or the set holds fewer than `max`. 1 = held, 0 = refused.
const ACQUIRE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[3]) == false and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`;

/**
 * Counted, expiring memberships: "at most `max` members per key", fleet-wide. Each member is a
 * sorted-set entry whose score is its expiry; its holder renews it (a heartbeat) and a member
 * nobody renews (its gateway died) stops counting when its lease runs out. While Redis is
 * unreachable the same rules apply to this replica's own members only. When Redis comes back as
 * another server (it restarted empty), this replica writes its members back at once, so a cap
 * counts every holder again before anyone is let in on a count Redis forgot.
 */
export class LeaseTable {
  readonly #local = new Map<string, Map<string, number>>();
  #acquires = 0;

  constructor(
    private readonly store: SharedStore,
    /** Key namespace inside the store, e.g. `streams`. */
    private readonly name: string,
    private readonly clock: Clock,
  ) {
    store.onRestart((redis) => this.#writeBack(redis));
  }

  /** Writes this replica's live members into a restarted (empty) Redis. */
  async #writeBack(redis: Redis): Promise<void> {
    const now = this.clock.now().getTime();
    const pipeline = redis.pipeline();
    for (const [key, members] of this.#local) {
      let last = 0;
      for (const [member, until] of members) {
        if (until <= now) continue;
        pipeline.zadd(this.#key(key), until, member);
        last = Math.max(last, until);
      }
      if (last > now) pipeline.pexpire(this.#key(key), last - now);
    }
    for (const [error] of (await pipeline.exec()) ?? []) if (error) throw error;
  }

  /** Takes (or keeps) `member`'s place under `key` for `leaseMs`; false when `max` others hold it. */
  async acquire(key: string, member: string, max: number, leaseMs: number): Promise<boolean> {
    const now = this.clock.now().getTime();
    const held = this.#acquireLocal(key, member, max, now + leaseMs, now);
    return this.store.either(
      async (redis) => {
        const ok = (await redis.eval(ACQUIRE, 1, this.#key(key), now, now + leaseMs, member, max, leaseMs)) === 1;
        if (!ok) this.#dropLocal(key, member);
        return ok;
      },
      () => held,
    );
  }

  /** Extends `member`'s lease (re-adding it if Redis lost it, so an outage heals). */
  async renew(key: string, member: string, leaseMs: number): Promise<void> {
    const now = this.clock.now().getTime();
    this.#local.get(key)?.set(member, now + leaseMs);
    await this.store.either(
      async (redis) => {
        await redis
          .multi()
          .zadd(this.#key(key), now + leaseMs, member)
          .pexpire(this.#key(key), leaseMs)
          .exec();
      },
      () => undefined,
    );
  }

  /** Gives `member`'s place back. */
  async release(key: string, member: string): Promise<void> {
    this.#dropLocal(key, member);
    await this.store.either(
      async (redis) => void (await redis.zrem(this.#key(key), member)),
      () => undefined,
    );
  }

  /** Members holding a place under `key` now. */
  async count(key: string): Promise<number> {
    const now = this.clock.now().getTime();
    return this.store.either(
      async (redis) => redis.zcount(this.#key(key), `(${now}`, "+inf"),
      () => [...(this.#local.get(key)?.values() ?? [])].filter((until) => until > now).length,
    );
  }

  #acquireLocal(key: string, member: string, max: number, until: number, now: number): boolean {
    if (++this.#acquires % 1_000 === 0) this.#sweep(now);
    let members = this.#local.get(key);
    if (!members) {
      members = new Map();
      this.#local.set(key, members);
    }
    for (const [other, expiry] of members) if (expiry <= now) members.delete(other);
    if (!members.has(member) && members.size >= max) return false;
    members.set(member, until);
    return true;
  }

  /** Forgets lapsed members of every key (members whose holder never released them). */
  #sweep(now: number): void {
    for (const [key, members] of this.#local) {
      for (const [member, until] of members) if (until <= now) members.delete(member);
      if (members.size === 0) this.#local.delete(key);
    }
  }

  #dropLocal(key: string, member: string): void {
    const members = this.#local.get(key);
    members?.delete(member);
    if (members?.size === 0) this.#local.delete(key);
  }

  #key(key: string): string {
    return `${this.store.prefix}${this.name}:${key}`;
  }
}
