import type { Logger } from "pino";
import type { Bus, BusSubscription } from "./bus";
import { publishAfterCommit } from "./publish";

/** How an `InvalidatedCache` trusts what it holds. */
export interface InvalidatedCacheOptions {
  /** Bus the invalidations arrive on (and are published to). */
  readonly bus: Bus;
  /** The invalidation channel (relative, like every channel): one per owning service, e.g. `cube:auth`. */
  readonly channel: string;
  /** Most age of an entry while the bus is healthy (invalidations arrive at once; this bounds a lost one). */
  readonly maxAgeMs: number;
  /**
   * Most age of an entry while the bus is down (invalidations may be missed): the fallback bound.
   * Every entry is dropped when the bus comes back.
   */
  readonly downMaxAgeMs: number;
  /** Most entries kept; the oldest are dropped past it. */
  readonly maxEntries: number;
  readonly now?: () => number;
}

/** What a loader found: the value, the tags that invalidate it, and an absolute expiry if it has one. */
export interface Loaded<V> {
  readonly value: V;
  readonly tags: readonly string[];
  /** Epoch ms after which the value must not be served (a session's expiry). */
  readonly expiresAt?: number;
}

interface Entry<V> {
  readonly value: V;
  readonly tags: readonly string[];
  readonly loadedAt: number;
  readonly expiresAt: number;
}

/** Counters of one cache (tests and metrics). */
export interface InvalidatedCacheStats {
  readonly entries: number;
  readonly hits: number;
  readonly misses: number;
  readonly invalidations: number;
}

/**
 * A per-replica read-through cache whose entries are dropped at once, on every replica, when the
 * database row behind them changes: a writer calls `publishInvalidation(tags)` after its commit,
 * every replica's cache on the channel drops the entries carrying any of those tags. Only positive
 * results are cached (an unknown or refused key always goes to the loader).
 *
 * Trust is bounded twice: while the bus is healthy an entry lives at most `maxAgeMs`; while it is
 * down (a missed invalidation is possible) at most `downMaxAgeMs`, and the whole cache is dropped
 * when the bus reconnects. A load that raced an invalidation (started before it, finished after)
 * is returned but not kept.
 */
export class InvalidatedCache<V> {
  readonly #options: InvalidatedCacheOptions;
  readonly #entries = new Map<string, Entry<V>>();
  readonly #byTag = new Map<string, Set<string>>();
  readonly #now: () => number;
  #epoch = 0;
  #hits = 0;
  #misses = 0;
  #invalidations = 0;
  #subscription: Promise<BusSubscription> | undefined;
  #offReconnect: (() => void) | undefined;

  constructor(options: InvalidatedCacheOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** Subscribes to the invalidation channel and the bus's reconnects. Call once before use. */
  async open(): Promise<void> {
    this.#subscription = this.#options.bus.subscribe(this.#options.channel, (message) =>
      this.invalidate(message.split(" ")),
    );
    this.#offReconnect = this.#options.bus.onReconnect(() => this.clear());
    await this.#subscription;
  }

  /** The cached value of `key` when it may still be trusted. */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    const now = this.#now();
    const maxAge = this.#options.bus.healthy() ? this.#options.maxAgeMs : this.#options.downMaxAgeMs;
    if (now - entry.loadedAt > maxAge || now >= entry.expiresAt) {
      this.#delete(key);
      return undefined;
    }
    return entry.value;
  }

  /** The value of `key`: cached, or loaded (and kept when found and not invalidated meanwhile). */
  async through(key: string, load: () => Promise<Loaded<V> | null>): Promise<V | null> {
    const cached = this.get(key);
    if (cached !== undefined) {
      this.#hits += 1;
      return cached;
    }
    this.#misses += 1;
    const epoch = this.#epoch;
    const loadedAt = this.#now();
    const loaded = await load();
    if (!loaded) return null;
    if (epoch === this.#epoch) this.#set(key, loaded, loadedAt);
    return loaded.value;
  }

  /** Drops every entry carrying one of `tags` on this replica (the channel's listener; writers use `publishInvalidation`). */
  invalidate(tags: Iterable<string>): void {
    this.#epoch += 1;
    this.#invalidations += 1;
    for (const tag of tags) {
      const keys = this.#byTag.get(tag);
      if (!keys) continue;
      for (const key of [...keys]) this.#delete(key);
    }
  }

  /** Drops everything (the bus reconnected: invalidations may have been missed). */
  clear(): void {
    this.#epoch += 1;
    this.#entries.clear();
    this.#byTag.clear();
  }

  stats(): InvalidatedCacheStats {
    return {
      entries: this.#entries.size,
      hits: this.#hits,
      misses: this.#misses,
      invalidations: this.#invalidations,
    };
  }

  async close(): Promise<void> {
    this.#offReconnect?.();
    await (await this.#subscription)?.unsubscribe();
    this.clear();
  }

  #set(key: string, loaded: Loaded<V>, loadedAt: number): void {
    this.#delete(key);
    while (this.#entries.size >= this.#options.maxEntries) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#delete(oldest);
    }
    const entry: Entry<V> = {
      value: loaded.value,
      tags: loaded.tags,
      loadedAt,
      expiresAt: loaded.expiresAt ?? Number.POSITIVE_INFINITY,
    };
    this.#entries.set(key, entry);
    for (const tag of loaded.tags) {
      let keys = this.#byTag.get(tag);
      if (!keys) {
        keys = new Set();
        this.#byTag.set(tag, keys);
      }
      keys.add(key);
    }
  }

  #delete(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    for (const tag of entry.tags) {
      const keys = this.#byTag.get(tag);
      keys?.delete(key);
      if (keys?.size === 0) this.#byTag.delete(tag);
    }
  }
}

/**
 * Tells every replica's caches on `channel` that the rows behind `tags` changed: call it after the
 * commit. The caches given are invalidated here at once (before the bus's own loopback), so this
 * replica never serves the old value after the write returns, Redis up or down. Tags have no spaces.
 */
export async function publishInvalidation(
  bus: Bus,
  channel: string,
  tags: Iterable<string>,
  logger: Logger,
  local: readonly Pick<InvalidatedCache<unknown>, "invalidate">[] = [],
): Promise<void> {
  const list = [...new Set(tags)];
  if (list.length === 0) return;
  for (const cache of local) cache.invalidate(list);
  await publishAfterCommit(bus, channel, list.join(" "), logger);
}
