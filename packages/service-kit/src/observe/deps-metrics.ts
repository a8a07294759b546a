import { Gauge } from "prom-client";
import type { Bus } from "../bus/bus";
import type { FeedStats } from "../bus/feed";
import { publishFailures } from "../bus/publish";
import type { Database } from "../store/database";
import type { ServiceMetrics } from "./metrics";

/**
 * The series of what every service stands on: its database pool (connections in use and idle,
 * queries waiting for one) and its bus (post-commit publish failures, reconnects, whether it can
 * deliver now). Read at scrape time; no labels beyond `state`, so the set is bounded. Returns the
 * function that stops listening to the bus.
 */
export function observeDeps(
  metrics: ServiceMetrics,
  deps: { readonly database: Database; readonly bus: Bus },
): () => void {
  const { database, bus } = deps;
  const pool = database.pool?.bind(database);
  if (pool) {
    new Gauge({
      name: "unimatrix_db_pool_connections",
      help: "Database pool connections now, by state (in_use, idle).",
      labelNames: ["state"] as const,
      registers: [metrics.registry],
      collect() {
        const now = pool();
        this.set({ state: "in_use" }, now.total - now.idle);
        this.set({ state: "idle" }, now.idle);
      },
    });
    metrics.gauge(
      "unimatrix_db_pool_waiting",
      "Queries waiting for a database pool connection now.",
      () => pool().waiting,
    );
  }
  metrics.counterFrom(
    "unimatrix_bus_publish_failures_total",
    "Post-commit bus publishes that failed (subscribers heal from the database).",
    () => publishFailures(bus),
  );
  const reconnects = metrics.counter(
    "unimatrix_bus_reconnects_total",
    "Times the bus lost its connection and got it back.",
  );
  metrics.gauge("unimatrix_bus_up", "1 when the bus can deliver now, 0 when it is down.", () =>
    bus.healthy() ? 1 : 0,
  );
  return bus.onReconnect(() => reconnects.inc());
}

/**
 * The series of a service's live feed: keys and listeners open, the backlog its listeners hold for
 * consumers that have not read it (the drain lag), listeners cut for passing the budget, and the
 * time spent draining (reads from the database until fanned out).
 */
export function observeFeed(metrics: ServiceMetrics, feed: { stats(): FeedStats }): void {
  metrics.gauge(
    "unimatrix_feed_keys",
    "Live feed keys (cubes, tenants) with listeners on this replica.",
    () => feed.stats().keys,
  );
  metrics.gauge("unimatrix_feed_listeners", "Streams attached to the live feed now.", () => feed.stats().listeners);
  metrics.gauge(
    "unimatrix_feed_backlog_items",
    "Items the feed's listeners hold for consumers that have not read them yet (drain lag).",
    () => feed.stats().backlogItems,
  );
  metrics.gauge(
    "unimatrix_feed_backlog_bytes",
    "Bytes the feed's listeners hold for consumers that have not read them yet.",
    () => feed.stats().backlogBytes,
  );
  metrics.counterFrom(
    "unimatrix_feed_cuts_total",
    "Listeners cut for passing the lag budget.",
    () => feed.stats().cuts,
  );
  metrics.counterFrom(
    "unimatrix_feed_drains_total",
    "Feed drains (wake → read → fanned out).",
    () => feed.stats().drains,
  );
  metrics.counterFrom(
    "unimatrix_feed_drain_seconds_total",
    "Time spent in feed drains, seconds (divide by unimatrix_feed_drains_total for the mean).",
    () => feed.stats().drainSeconds,
  );
  metrics.counterFrom(
    "unimatrix_feed_offers_total",
    "Commits fanned out without a read (offered by this replica, or carried by their doorbell).",
    () => feed.stats().offers,
  );
}
