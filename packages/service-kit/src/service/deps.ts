import type { Logger } from "pino";
import type { Bus } from "../bus/bus";
import type { Clock } from "../clock";
import type { ConfigOf, commonEnv } from "../config";
import type { ServiceMetrics } from "../observe/metrics";
import type { Database } from "../store/database";

/** The settings every service shares, as read by `readConfig(commonEnv)`. */
export type CommonConfig = ConfigOf<typeof commonEnv>;

/** What a service's wiring receives: everything the kit opened for it (the host comes after). */
export interface ServiceDeps {
  readonly database: Database;
  readonly bus: Bus;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly internalKey: string;
  readonly operatorToken: string | undefined;
  /** The settings every service shares (Redis URL and prefix for fleet-wide state, drain, …). */
  readonly config: CommonConfig;
  /** The service's Prometheus registry, for its own gauges and counters. */
  readonly metrics: ServiceMetrics;
}

/** Periodic work the kit owns: run every `everyMs` (never overlapping itself), stopped before close. */
export interface Background {
  readonly name: string;
  /** Interval; 0 or less = not scheduled (a test can still run it with `runBackground`). */
  readonly everyMs: number;
  /** One round; `signal` aborts when the service stops, so a long round can end at a safe point. */
  run(signal: AbortSignal): Promise<unknown>;
}
