import { type Bus, Feed, type FeedSource } from "@unimatrix/service-kit/bus";
import type { Logger } from "pino";
import { transitionEvent, transitionSize, type WatchEvent } from "../convert";
import { PAGE } from "../rules/watch";
import type { LogStore } from "../store/log";
import type { PresenceEvent } from "../store/rows";
import { parseSignal, presenceChannel } from "./signal";

/** Where a tenant's feed stands: the last event read and the revocation counter read with it. */
export interface FeedCursor {
  readonly seq: bigint;
  readonly revocations: bigint;
}

/**
 * What the feed hands every watcher of a tenant: a committed transition with its wire message
 * (built and encoded once for all watchers) and size, or "the revocation counter changed".
 */
export type WatchItem =
  | { readonly kind: "event"; readonly event: PresenceEvent; readonly message: WatchEvent; readonly size: number }
  | { readonly kind: "revocations"; readonly revocations: bigint };

/** Where a feed reads a tenant's log (the LogStore; an in-memory log in unit tests). */
export type LogSource = Pick<LogStore, "page" | "state">;

/** The wire size of a feed item: what a watcher has to take off the wire (a marker costs nothing). */
export function itemSize(item: WatchItem): number {
  return item.kind === "event" ? item.size : 0;
}

/**
 * The presence log as a kit feed source: per tenant, events after a cursor read in one statement
 * with the tenant's revocation counter; a changed counter becomes a marker item, so watchers
 * re-check machine credentials on the drain that saw it (a lost doorbell heals on the next read).
 */
export function presenceFeedSource(logs: LogSource): FeedSource<FeedCursor, WatchItem> {
  return {
    channel: presenceChannel,
    async head(tenantId) {
      const state = await logs.state(tenantId);
      return { seq: state.head, revocations: state.revocations };
    },
    async read(tenantId, after, limit) {
      const page = await logs.page(tenantId, after.seq, limit);
      const items: WatchItem[] = page.events.map((event) => ({
        kind: "event",
        event,
        message: transitionEvent(event),
        size: transitionSize(event),
      }));
      if (page.revocations !== after.revocations) items.push({ kind: "revocations", revocations: page.revocations });
      const last = page.events.at(-1);
      return { items, cursor: { seq: last?.seq ?? after.seq, revocations: page.revocations } };
    },
    // Every well-formed doorbell (transition, link, revocation, poke) is worth a read.
    isNews: (message) => parseSignal(message) !== null,
  };
}

/** Options of the watch feed. */
export interface WatchFeedOptions {
  readonly logs: LogSource;
  readonly bus: Bus;
  readonly logger: Logger;
  /** A watcher with more unread bytes than this is cut. */
  readonly maxLagBytes: number;
  /** Reads without a doorbell this often (heals a lost publish). */
  readonly healMs: number;
  /** How often feeds read while the bus is down (default the kit's BUS_DOWN_POLL_MS, 1 s). */
  readonly downPollMs?: number | undefined;
}

/** This replica's watch feed: one drain per tenant per doorbell, fanned out to every watcher of it. */
export function watchFeed(options: WatchFeedOptions): Feed<FeedCursor, WatchItem> {
  return new Feed({
    source: presenceFeedSource(options.logs),
    bus: options.bus,
    logger: options.logger,
    pageSize: PAGE,
    healMs: options.healMs,
    downPollMs: options.downPollMs,
    budget: { maxBytes: options.maxLagBytes },
  });
}
