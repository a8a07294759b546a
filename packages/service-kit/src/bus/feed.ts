import type { Logger } from "pino";
import type { Bus, BusSubscription } from "./bus";

/** Where a feed reads from: the database side of one kind of live log (a cube's activity, a tenant's presence log). */
export interface FeedSource<Cursor, Item> {
  /** The bus channel whose doorbell says "new items for `key`". */
  channel(key: string): string;
  /** Where a new feed for `key` starts (usually its current head: streams catch up themselves). */
  head(key: string): Promise<Cursor>;
  /**
   * Items after `after`, in order, at most `limit`, and the cursor after the last one. Items are
   * handed unchanged to every listener on the replica: build wire messages here, once, and mark
   * them with `encodeOnce` so each is serialized once however many streams write it.
   */
  read(
    key: string,
    after: Cursor,
    limit: number,
  ): Promise<{ readonly items: readonly Item[]; readonly cursor: Cursor }>;
  /** True when a doorbell message means "new items" (default: every message); others go to `notify`. */
  isNews?(message: string): boolean;
  /**
   * True when a news doorbell announces nothing past `cursor` (it names the last item of its
   * commit, which this replica already fanned out, e.g. through `offer`): the feed skips the read.
   */
  covered?(message: string, cursor: Cursor): boolean;
  /**
   * The items a news doorbell of `key` carries in full (a commit's items, with the cursor before
   * them and the cursor after them). The feed fans them out without a read when they follow its
   * cursor exactly, as `offer` does; otherwise, or when this answers undefined, it reads.
   */
  carried?(key: string, message: string): Carried<Cursor, Item> | undefined;
  /** Whether two cursors are the same position (`offer`, carried items); default `===`. */
  same?(a: Cursor, b: Cursor): boolean;
}

/** Items a doorbell carries: the cursor they follow, the items, and the cursor after the last one. */
export interface Carried<Cursor, Item> {
  readonly after: Cursor;
  readonly items: readonly Item[];
  readonly cursor: Cursor;
}

/** What a listener has not yet handed to its consumer: the lag the feed's budget limits. */
export interface Lag {
  readonly items: number;
  readonly bytes: number;
}

/** One stream (or anything else) fed by a feed. */
export interface FeedListener<Item> {
  /** New items, contiguous and in order. Called once per page read, shared with every other listener. */
  push(items: readonly Item[]): void;
  /** A doorbell that is not news (e.g. "access changed"), or `"reconnect"` after a bus outage. */
  notify?(message: string): void;
  /** What the listener holds for a consumer that has not read it yet. */
  lag(): Lag;
  /** The listener passed the feed's lag budget and was detached: end the stream (the consumer resumes from its cursor). */
  cut(): void;
}

/** Options of a feed. */
export interface FeedOptions<Cursor, Item> {
  readonly source: FeedSource<Cursor, Item>;
  readonly bus: Bus;
  readonly logger: Logger;
  /** Rows per read (default 500). */
  readonly pageSize?: number;
  /** Reads even without a doorbell this often (heals a lost publish or a down bus); 0 = never. Default 1000. */
  readonly healMs?: number;
  /** The lag past which a listener is cut; unset limits are unlimited. */
  readonly budget?: { readonly maxItems?: number; readonly maxBytes?: number };
  /** While the bus is down, every key is read this often (a doorbell that never rings); 0 = never. Default BUS_DOWN_POLL_MS. */
  readonly downPollMs?: number | undefined;
}

/** What a feed has done and holds, for metrics (`observeFeed`). */
export interface FeedStats {
  readonly keys: number;
  readonly listeners: number;
  /** What listeners hold unread for their consumers, summed. */
  readonly backlogItems: number;
  readonly backlogBytes: number;
  /** Listeners cut for passing the budget, since the feed opened. */
  readonly cuts: number;
  /** Drains run, and the seconds they took, since the feed opened. */
  readonly drains: number;
  readonly drainSeconds: number;
  /** Commits fanned out without a read (offered, or carried by their doorbell), since the feed opened. */
  readonly offers: number;
}

/** While the bus is down, feeds read the database this often by default (other replicas' doorbells are lost meanwhile). */
export const BUS_DOWN_POLL_MS = 1_000;

/** The message `notify` receives after the bus reconnected (messages may have been missed). */
const RECONNECTED = "reconnect";

interface KeyFeed<Cursor, Item> {
  readonly key: string;
  readonly listeners: Set<FeedListener<Item>>;
  cursor: Cursor | undefined;
  ready: Promise<void>;
  subscription: BusSubscription | undefined;
  heal: NodeJS.Timeout | undefined;
  draining: Promise<void> | null;
  again: boolean;
  closed: boolean;
}

/**
 * The per-replica reader of live logs, one per key with listeners: woken by the bus (or its heal
 * timer, or a bus reconnect), it reads new items ONCE from the database and hands the same items
 * to every listener, so N streams cost one query per wake instead of N. A listener whose unread
 * backlog passes the budget is cut instead of buffering without bound.
 */
export class Feed<Cursor, Item> {
  readonly #feeds = new Map<string, KeyFeed<Cursor, Item>>();
  readonly #offReconnect: () => void;
  readonly #pageSize: number;
  readonly #healMs: number;
  readonly #counts = { cuts: 0, drains: 0, drainSeconds: 0, offers: 0 };

  readonly #downPoll: NodeJS.Timeout | undefined;

  constructor(private readonly options: FeedOptions<Cursor, Item>) {
    this.#pageSize = options.pageSize ?? 500;
    this.#healMs = options.healMs ?? 1_000;
    this.#offReconnect = options.bus.onReconnect(() => {
      for (const feed of this.#feeds.values()) {
        for (const listener of feed.listeners) listener.notify?.(RECONNECTED);
        void this.#wake(feed);
      }
    });
    // While the bus is down, other replicas' commits are read on a short interval instead.
    const downPollMs = options.downPollMs ?? BUS_DOWN_POLL_MS;
    if (downPollMs > 0) {
      this.#downPoll = setInterval(() => {
        if (options.bus.healthy()) return;
        for (const feed of this.#feeds.values()) void this.#wake(feed);
      }, downPollMs);
      this.#downPoll.unref();
    }
  }

  /**
   * Attaches a listener to `key`'s feed, opening it (bus subscription, head) on first use.
   * Resolves with the feed's cursor: items after it will be pushed.
   */
  async attach(key: string, listener: FeedListener<Item>): Promise<Cursor> {
    let feed = this.#feeds.get(key);
    if (!feed) {
      const opened: KeyFeed<Cursor, Item> = {
        key,
        listeners: new Set(),
        cursor: undefined,
        ready: Promise.resolve(),
        subscription: undefined,
        heal: undefined,
        draining: null,
        again: false,
        closed: false,
      };
      opened.ready = this.#open(opened);
      this.#feeds.set(key, opened);
      feed = opened;
    }
    feed.listeners.add(listener);
    try {
      await feed.ready;
    } catch (error) {
      this.detach(key, listener);
      throw error;
    }
    return feed.cursor as Cursor;
  }

  /** Detaches a listener; the last one closes the key's feed. */
  detach(key: string, listener: FeedListener<Item>): void {
    const feed = this.#feeds.get(key);
    if (!feed?.listeners.delete(listener) || feed.listeners.size > 0) return;
    this.#feeds.delete(key);
    void feed.ready.catch(() => {}).finally(() => this.#close(feed));
  }

  /** Reads `key`'s new items now (e.g. right after a local commit); resolves when read and fanned out. */
  wake(key: string): Promise<void> {
    const feed = this.#feeds.get(key);
    return feed ? this.#wake(feed) : Promise.resolve();
  }

  /**
   * Hands items this replica has just committed, and holds in full, to `key`'s listeners without
   * reading them back: only when they follow the feed's cursor exactly (`after`, compared with
   * the source's `same`, default `===`) and no read is in flight, so they are the next items and
   * nothing is fanned out twice. Otherwise it wakes the feed, which reads them. `cursor` is the
   * cursor after the last item.
   */
  offer(key: string, after: Cursor, items: readonly Item[], cursor: Cursor): Promise<void> {
    const feed = this.#feeds.get(key);
    return feed ? this.#offer(feed, { after, items, cursor }) : Promise.resolve();
  }

  /** Listeners attached to `key` on this replica. */
  listeners(key: string): number {
    return this.#feeds.get(key)?.listeners.size ?? 0;
  }

  /** Keys, listeners and their backlog now; cuts and drains so far. */
  stats(): FeedStats {
    let listeners = 0;
    let backlogItems = 0;
    let backlogBytes = 0;
    for (const feed of this.#feeds.values()) {
      for (const listener of feed.listeners) {
        listeners += 1;
        const lag = listener.lag();
        backlogItems += lag.items;
        backlogBytes += lag.bytes;
      }
    }
    return { keys: this.#feeds.size, listeners, backlogItems, backlogBytes, ...this.#counts };
  }

  /** Closes every feed (listeners are not told: their streams end with the server). */
  async close(): Promise<void> {
    if (this.#downPoll) clearInterval(this.#downPoll);
    this.#offReconnect();
    const feeds = [...this.#feeds.values()];
    this.#feeds.clear();
    await Promise.all(feeds.map((feed) => this.#close(feed)));
  }

  async #open(feed: KeyFeed<Cursor, Item>): Promise<void> {
    const { source, bus } = this.options;
    feed.subscription = await bus.subscribe(source.channel(feed.key), (message) => {
      if (source.isNews && !source.isNews(message)) {
        for (const listener of feed.listeners) listener.notify?.(message);
        return;
      }
      // Before the head is read nothing is fanned out: the head covers what committed before it.
      if (feed.cursor === undefined || source.covered?.(message, feed.cursor)) return;
      const carried = source.carried?.(feed.key, message);
      void (carried ? this.#offer(feed, carried) : this.#wake(feed));
    });
    feed.cursor = await source.head(feed.key);
    if (this.#healMs > 0) {
      feed.heal = setInterval(() => void this.#wake(feed), this.#healMs);
      feed.heal.unref();
    }
    if (feed.closed) await this.#close(feed);
  }

  /** Fans out items that follow the cursor exactly while no read is in flight; otherwise reads. */
  #offer(feed: KeyFeed<Cursor, Item>, offered: Carried<Cursor, Item>): Promise<void> {
    const same = this.options.source.same ?? ((a: Cursor, b: Cursor) => a === b);
    if (feed.closed || feed.draining || feed.cursor === undefined || !same(feed.cursor, offered.after)) {
      return this.#wake(feed);
    }
    feed.cursor = offered.cursor;
    this.#counts.offers += 1;
    if (offered.items.length > 0) this.#fanOut(feed, offered.items);
    return Promise.resolve();
  }

  /** Coalesces wakes: one drain at a time, and one more pass if woken meanwhile. */
  #wake(feed: KeyFeed<Cursor, Item>): Promise<void> {
    if (feed.closed || feed.cursor === undefined) return feed.ready;
    if (feed.draining) {
      feed.again = true;
      return feed.draining;
    }
    feed.draining = this.#drain(feed).finally(() => {
      feed.draining = null;
    });
    return feed.draining;
  }

  async #drain(feed: KeyFeed<Cursor, Item>): Promise<void> {
    const began = process.hrtime.bigint();
    try {
      do {
        feed.again = false;
        for (;;) {
          if (feed.closed) return;
          const page = await this.options.source.read(feed.key, feed.cursor as Cursor, this.#pageSize);
          feed.cursor = page.cursor;
          if (page.items.length > 0) this.#fanOut(feed, page.items);
          if (page.items.length < this.#pageSize) break;
        }
      } while (feed.again);
    } catch (error) {
      if (!feed.closed) this.options.logger.warn({ err: error, key: feed.key }, "feed read failed; will retry");
    } finally {
      this.#counts.drains += 1;
      this.#counts.drainSeconds += Number(process.hrtime.bigint() - began) / 1e9;
    }
  }

  #fanOut(feed: KeyFeed<Cursor, Item>, items: readonly Item[]): void {
    const budget = this.options.budget;
    for (const listener of [...feed.listeners]) {
      try {
        listener.push(items);
      } catch (error) {
        this.options.logger.error({ err: error, key: feed.key }, "feed listener threw");
      }
      if (!budget) continue;
      const lag = listener.lag();
      if (
        lag.items > (budget.maxItems ?? Number.POSITIVE_INFINITY) ||
        lag.bytes > (budget.maxBytes ?? Number.POSITIVE_INFINITY)
      ) {
        this.detach(feed.key, listener);
        this.#counts.cuts += 1;
        listener.cut();
      }
    }
  }

  async #close(feed: KeyFeed<Cursor, Item>): Promise<void> {
    feed.closed = true;
    if (feed.heal) clearInterval(feed.heal);
    feed.heal = undefined;
    const subscription = feed.subscription;
    feed.subscription = undefined;
    await subscription?.unsubscribe().catch(() => {});
  }
}
