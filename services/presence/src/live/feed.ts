import type { Bus, BusSubscription } from "@unimatrix/service-kit";
import type { Logger } from "pino";
import { PAGE } from "../rules/watch";
import type { LogState, LogStore } from "../store/log";
import type { PresenceEvent } from "../store/rows";
import { parseSignal, presenceChannel } from "./signal";
import { EventWindow } from "./window";

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

/** Where a feed reads a tenant's log (the LogStore; an in-memory log in unit tests). */
export type LogSource = Pick<LogStore, "page" | "state">;

/** Options of a feed. */
export interface FeedOptions {
  readonly tenantId: string;
  readonly logs: LogSource;
  readonly logger: Logger;
  readonly maxLagBytes: number;
  readonly sizeOf: (event: PresenceEvent) => number;
}

/**
 * One tenant's live log on this replica: it drains the database once per doorbell and keeps a
 * window of recent events, so N watchers cost one query per wake instead of N. Watchers behind
 * the window read the database themselves.
 */
export class TenantFeed {
  /** The last seq read from the database. */
  cursor = 0n;
  state: LogState = { head: 0n, floor: 0n, revocations: 0n };
  // Keep at least the allowed lag plus one page in the window, so a live watcher that is
  // within its allowance always reads from memory.
  window: EventWindow<PresenceEvent>;
  readonly watchers = new Set<FeedWatcher>();
  #draining: Promise<void> | null = null;
  #again = false;

  constructor(readonly options: FeedOptions) {
    this.window = new EventWindow(0n, options.maxLagBytes * 2, PAGE);
  }

  /** Starts at the tenant's head. */
  async init(): Promise<void> {
    this.state = await this.options.logs.state(this.options.tenantId);
    this.window = new EventWindow(this.state.head, this.options.maxLagBytes * 2, PAGE);
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
        for (const event of page.events) {
          this.window.append(event, this.options.sizeOf(event));
          this.cursor = event.seq;
        }
        // Wake watchers page by page: under a steady stream of doorbells this loop may not
        // end for a while, and nobody should wait for it to. Nothing new: nobody is woken.
        if (changed) this.#notify();
        if (page.events.length < PAGE) break;
      }
    } while (this.#again);
  }

  #notify(): void {
    for (const watcher of this.watchers) {
      if (watcher.live && this.lagOf(watcher.cursor) > this.options.maxLagBytes) watcher.cut();
      else watcher.wake();
    }
  }

  /** Bytes of windowed events after `cursor`; infinite when the window no longer covers it. */
  lagOf(cursor: bigint): number {
    return this.window.lagOf(cursor);
  }

  /** Windowed events after `cursor` (at most `limit`), or null when the window does not cover it. */
  after(cursor: bigint, limit = PAGE): PresenceEvent[] | null {
    return this.window.after(cursor, limit);
  }
}

/** Options of the watch hub. */
export interface WatchHubOptions {
  readonly bus: Bus;
  readonly logs: LogSource;
  readonly logger: Logger;
  readonly maxLagBytes: number;
  readonly sizeOf: (event: PresenceEvent) => number;
}

/** The feeds of this replica: one per watched tenant, subscribed to its doorbell while used. */
export class WatchHub {
  readonly #feeds = new Map<string, { feed: Promise<TenantFeed>; refs: number; sub: Promise<BusSubscription> }>();
  readonly #unsubscribeReconnect: () => void;

  constructor(private readonly options: WatchHubOptions) {
    // After a bus outage every feed drains from its cursor: nothing published meanwhile is lost.
    this.#unsubscribeReconnect = options.bus.onReconnect(() => {
      for (const entry of this.#feeds.values()) void entry.feed.then((feed) => feed.poke()).catch(() => {});
    });
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

  /** Stops healing feeds on bus reconnects. */
  close(): void {
    this.#unsubscribeReconnect();
  }
}
