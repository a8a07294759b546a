import { type Bus, type Carried, Feed, type FeedSource } from "@unimatrix/service-kit/bus";
import type { Logger } from "pino";
import { transitionEvent, transitionSize, type WatchEvent } from "../convert";
import { PAGE } from "../rules/watch";
import type { LogStore } from "../store/log";
import type { LogPosition, PresenceEvent } from "../store/rows";
import { type CarriedEvent, type PresenceSignal, parseSignal, presenceChannel } from "./signal";

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

/** A transition as every watcher of the replica shares it: its wire message built (and encoded) once. */
function eventItem(event: PresenceEvent): WatchItem {
  return { kind: "event", event, message: transitionEvent(event), size: transitionSize(event) };
}

/** The feed's cursor and the items of one committed transition at `position` (kit `offer`, carried items). */
function committed(event: PresenceEvent, position: LogPosition): Carried<FeedCursor, WatchItem> {
  return {
    after: { seq: position.prev, revocations: position.revocations },
    items: [eventItem(event)],
    cursor: { seq: event.seq, revocations: position.revocations },
  };
}

/**
 * Hands a transition this replica just committed to the tenant's watchers on this replica
 * without reading it back, when it is the next one for the feed (kit `Feed.offer`); otherwise
 * the feed reads. Its doorbell, coming back over the bus, is then covered.
 */
export function offerCommitted(
  feed: Feed<FeedCursor, WatchItem>,
  event: PresenceEvent,
  position: LogPosition,
): Promise<void> {
  // No watcher of the tenant here: nothing to build (link churn of an unwatched tenant).
  if (feed.listeners(event.tenantId) === 0) return Promise.resolve();
  const { after, items, cursor } = committed(event, position);
  return feed.offer(event.tenantId, after, items, cursor);
}

const DIGITS = /^\d{1,19}$/;

/** The event a doorbell carries, checked field by field; undefined when absent or malformed (the feed reads). */
function carriedEvent(tenantId: string, seq: string | undefined, ev: CarriedEvent | undefined) {
  if (!ev || typeof seq !== "string" || !DIGITS.test(seq)) return undefined;
  const { prev, rev, m, n, up, at } = ev;
  if (typeof prev !== "string" || !DIGITS.test(prev) || typeof rev !== "string" || !DIGITS.test(rev)) return undefined;
  if (typeof m !== "string" || typeof n !== "string" || typeof up !== "boolean" || !Number.isSafeInteger(at)) {
    return undefined;
  }
  const event: PresenceEvent = { seq: BigInt(seq), tenantId, machineId: m, name: n, linked: up, at: new Date(at) };
  return committed(event, { prev: BigInt(prev), revocations: BigInt(rev) });
}

/**
 * The presence log as a kit feed source: per tenant, events after a cursor read in one statement
 * with the tenant's revocation counter; a changed counter becomes a marker item, so watchers
 * re-check machine credentials on the drain that saw it (a lost doorbell heals on the next read).
 */
export function presenceFeedSource(logs: LogSource): FeedSource<FeedCursor, WatchItem> {
  // The kit asks isNews, covered and carried of the same doorbell in turn: parse it once.
  let lastMessage: string | undefined;
  let lastSignal: PresenceSignal | null = null;
  const parsed = (message: string): PresenceSignal | null => {
    if (message !== lastMessage) {
      lastSignal = parseSignal(message);
      lastMessage = message;
    }
    return lastSignal;
  };
  return {
    channel: presenceChannel,
    async head(tenantId) {
      const state = await logs.state(tenantId);
      return { seq: state.head, revocations: state.revocations };
    },
    async read(tenantId, after, limit) {
      const page = await logs.page(tenantId, after.seq, limit);
      const items: WatchItem[] = page.events.map(eventItem);
      if (page.revocations !== after.revocations) items.push({ kind: "revocations", revocations: page.revocations });
      const last = page.events.at(-1);
      return { items, cursor: { seq: last?.seq ?? after.seq, revocations: page.revocations } };
    },
    // Every well-formed doorbell (transition, link, revocation, poke) is news.
    isNews: (message) => parsed(message) !== null,
    // A transition's doorbell naming a cursor the feed passed (offered here, or read meanwhile).
    covered(message, cursor) {
      const signal = parsed(message);
      if (!signal || signal.revoked !== undefined || signal.poke || typeof signal.seq !== "string") return false;
      return DIGITS.test(signal.seq) && BigInt(signal.seq) <= cursor.seq;
    },
    // A transition's doorbell with the event in full (not from a replica of the release before).
    carried(tenantId, message) {
      const signal = parsed(message);
      if (!signal || signal.revoked !== undefined || signal.poke) return undefined;
      return carriedEvent(tenantId, signal.seq, signal.ev);
    },
    same: (a, b) => a.seq === b.seq && a.revocations === b.revocations,
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
