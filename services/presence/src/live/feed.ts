import {
  type Bus,
  type BusSubscription,
  type ReleaseSlot,
  type StreamCounter,
  StreamLimiter,
} from "@unimatrix/service-kit";
import type { Logger } from "pino";
import type { LogState, LogStore } from "../store/log";
import type { PresenceEvent } from "../store/rows";
import { parseSignal, presenceChannel } from "./signal";

/** A recent event in a feed's window, with its wire size and the feed's running byte total. */
export interface FeedEntry {
  readonly event: PresenceEvent;
  readonly size: number;
  /** Bytes of every entry the feed appended, up to and including this one. */
  readonly cum: number;
}

/** A watch stream as a feed sees it. */
export interface FeedWatcher {
  /** The last cursor handed to the transport. */
  readonly cursor: bigint;
  /** True once the stream delivered its backlog (only live streams can fall behind). */
  readonly live: boolean;
  /** The feed has news (events or a changed log state). */
  wake(): void;
  /** The watcher is more than the allowed bytes behind. */
  cut(): void;
}

/** Options of a feed. */
export interface FeedOptions {
  readonly tenantId: string;
  readonly logs: LogStore;
  readonly logger: Logger;
  readonly maxLagBytes: number;
  readonly sizeOf: (event: PresenceEvent) => number;
}

const PAGE = 256;
/** While the bus is down, every feed drains the database this often (a doorbell that never rings). */
export const BUS_DOWN_POLL_MS = 1_000;

/**
 * One tenant's live log on this replica: it drains the database once per doorbell and keeps a
 * window of recent events, so N watchers cost one query per wake instead of N. Watchers behind
 * the window read the database themselves.
 */
export class TenantFeed {
  /** The window covers events with seq > base. */
  base = 0n;
  /** The last seq read from the database. */
  cursor = 0n;
  state: LogState = { head: 0n, floor: 0n, revocations: 0n };
  readonly ring: FeedEntry[] = [];
  readonly watchers = new Set<FeedWatcher>();
  #total = 0;
  #ringBytes = 0;
  #draining: Promise<void> | null = null;
  #again = false;

  constructor(readonly options: FeedOptions) {}

  /** Starts at the tenant's head. */
  async init(): Promise<void> {
    this.state = await this.options.logs.state(this.options.tenantId);
    this.base = this.state.head;
    this.cursor = this.state.head;
  }

  /** Drains the database (coalescing concurrent pokes) and wakes the watchers. */
  poke(): Promise<void> {
    if (this.#draining) {
      this.#again = true;
      return this.#draining;
    }
    this.#draining = this.#drain().finally(() => {
      this.#draining = null;
    });
    return this.#draining;
  }

  async #drain(): Promise<void> {
    do {
      this.#again = false;
      for (;;) {
        const page = await this.options.logs.page(this.options.tenantId, this.cursor, PAGE);
        const changed =
          page.events.length > 0 || page.revocations !== this.state.revocations || page.floor !== this.state.floor;
        this.state = { head: page.head, floor: page.floor, revocations: page.revocations };
        for (const event of page.events) this.#append(event);
        // Wake watchers page by page: under a steady stream of doorbells this loop may not
        // end for a while, and nobody should wait for it to. Nothing new: nobody is woken.
        if (changed) this.#notify();
        if (page.events.length < PAGE) break;
      }
    } while (this.#again);
  }

  #append(event: PresenceEvent): void {
    const size = this.options.sizeOf(event);
    this.#total += size;
    this.#ringBytes += size;
    this.ring.push({ event, size, cum: this.#total });
    this.cursor = event.seq;
    // Keep at least the allowed lag plus one page in the window, so a live watcher that is
    // within its allowance always reads from memory.
    const keep = this.options.maxLagBytes * 2;
    while (this.#ringBytes > keep && this.ring.length > PAGE) {
      const dropped = this.ring.shift() as FeedEntry;
      this.#ringBytes -= dropped.size;
      this.base = dropped.event.seq;
    }
  }

  #notify(): void {
    for (const watcher of this.watchers) {
      if (watcher.live && this.lagOf(watcher.cursor) > this.options.maxLagBytes) watcher.cut();
      else watcher.wake();
    }
  }

  /** Bytes of windowed events after `cursor`; infinite when the window no longer covers it. */
  lagOf(cursor: bigint): number {
    if (cursor < this.base) return Number.POSITIVE_INFINITY;
    let lo = 0;
    let hi = this.ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.ring[mid] as FeedEntry).event.seq <= cursor) lo = mid + 1;
      else hi = mid;
    }
    if (lo === this.ring.length) return 0;
    const first = this.ring[lo] as FeedEntry;
    return this.#total - (first.cum - first.size);
  }

  /** Windowed events after `cursor` (at most `limit`), or null when the window does not cover it. */
  after(cursor: bigint, limit = PAGE): PresenceEvent[] | null {
    if (cursor < this.base) return null;
    const out: PresenceEvent[] = [];
    for (let i = this.ring.length - 1; i >= 0; i--) {
      const entry = this.ring[i] as FeedEntry;
      if (entry.event.seq <= cursor) break;
      out.push(entry.event);
    }
    out.reverse();
    return out.slice(0, limit);
  }
}

/** Options of the watch hub. */
export interface WatchHubOptions {
  readonly bus: Bus;
  readonly logs: LogStore;
  readonly logger: Logger;
  readonly maxLagBytes: number;
  readonly maxStreams: number;
  /** Where open streams are counted (default: this replica's memory). */
  readonly counter?: StreamCounter | undefined;
  readonly sizeOf: (event: PresenceEvent) => number;
  /** How often feeds drain while the bus is down (default BUS_DOWN_POLL_MS). */
  readonly downPollMs?: number | undefined;
}

/** The feeds of this replica (one per watched tenant) and the open-stream counts per credential. */
export class WatchHub {
  readonly #feeds = new Map<string, { feed: Promise<TenantFeed>; refs: number; sub: Promise<BusSubscription> }>();
  readonly #limiter: StreamLimiter;
  readonly #unsubscribeReconnect: () => void;
  readonly #downPoll: NodeJS.Timeout;

  constructor(private readonly options: WatchHubOptions) {
    this.#limiter = new StreamLimiter({
      max: options.maxStreams,
      what: "WatchMachines streams",
      counter: options.counter,
    });
    // After a bus outage every feed drains from its cursor: nothing published meanwhile is lost.
    this.#unsubscribeReconnect = options.bus.onReconnect(() => this.#pokeAll());
    // While it is down, other replicas' transitions are read on a short interval instead.
    this.#downPoll = setInterval(() => {
      if (!options.bus.healthy()) this.#pokeAll();
    }, options.downPollMs ?? BUS_DOWN_POLL_MS);
    this.#downPoll.unref();
  }

  #pokeAll(): void {
    for (const entry of this.#feeds.values()) void entry.feed.then((feed) => feed.poke()).catch(() => {});
  }

  /**
   * Takes one of a credential's stream slots (see `credentialKey`), counted fleet-wide when the
   * hub's counter is; RESOURCE_EXHAUSTED when all are taken.
   */
  reserveStream(key: string): Promise<ReleaseSlot> {
    return this.#limiter.acquire(key);
  }

  /** The tenant's feed, created (and subscribed to the bus) on first use. */
  async acquire(tenantId: string): Promise<TenantFeed> {
    const existing = this.#feeds.get(tenantId);
    if (existing) {
      existing.refs += 1;
      return existing.feed;
    }
    const holder: { feed: TenantFeed | null } = { feed: null };
    const sub = this.options.bus.subscribe(presenceChannel(tenantId), (message) => {
      if (!parseSignal(message)) return;
      void holder.feed?.poke().catch((error: unknown) => this.options.logger.warn({ err: error }, "feed drain failed"));
    });
    const feed = (async () => {
      await sub;
      const created = new TenantFeed({ ...this.options, tenantId });
      await created.init();
      holder.feed = created;
      return created;
    })();
    const entry = { feed, refs: 1, sub };
    this.#feeds.set(tenantId, entry);
    try {
      return await feed;
    } catch (error) {
      this.#feeds.delete(tenantId);
      void sub.then((s) => s.unsubscribe()).catch(() => {});
      throw error;
    }
  }

  /** Gives a feed back; the last user unsubscribes it. */
  async release(tenantId: string): Promise<void> {
    const entry = this.#feeds.get(tenantId);
    if (!entry) return;
    entry.refs -= 1;
    if (entry.refs > 0) return;
    this.#feeds.delete(tenantId);
    try {
      await (await entry.sub).unsubscribe();
    } catch (error) {
      this.options.logger.warn({ err: error, tenantId }, "unsubscribe failed");
    }
  }

  close(): void {
    clearInterval(this.#downPoll);
    this.#unsubscribeReconnect();
  }
}
