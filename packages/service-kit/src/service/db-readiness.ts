import type { Logger } from "pino";
import type { HealthRegistry } from "../grpc/health";
import type { ServiceMetrics } from "../observe/metrics";
import type { Database } from "../store/database";
import type { Background } from "./deps";

/** The dependency name health reports the database under. */
const DATABASE = "database";

/**
 * Readiness follows the database: every `everyMs` the database is probed (`Database.probe`: one
 * statement on a connection of its own, which must find it writable). While the probe fails the
 * service's health answers NOT_SERVING for every service name (so does the gateway's `/readyz`,
 * which asks it); the first probe that passes makes it SERVING again. Calls are not refused
 * meanwhile — they fail on their own with UNAVAILABLE and succeed again as soon as the database
 * answers. Logs each change once and exports `unimatrix_db_up`. A background job for `bootService`
 * to schedule; never rejects.
 */
export function watchDatabase(
  database: Database,
  health: HealthRegistry,
  options: { readonly everyMs: number; readonly logger: Logger; readonly metrics: ServiceMetrics },
): Background {
  const { everyMs, logger, metrics } = options;
  let down: string | undefined;
  metrics.gauge(
    "unimatrix_db_up",
    "1 when the last database probe found it reachable and writable, 0 when not (health is NOT_SERVING meanwhile).",
    () => (down === undefined ? 1 : 0),
  );
  // A probe may take most of an interval, and never less than a second.
  const timeoutMs = Math.max(1_000, Math.floor(everyMs * 0.8));
  return {
    name: "database readiness probe",
    everyMs,
    async run() {
      let now: string | undefined;
      try {
        await database.probe(timeoutMs);
      } catch (error) {
        now = (error as Error).message || String(error);
      }
      const changed = (now === undefined) !== (down === undefined);
      if (changed && now === undefined) logger.info({ was: down }, "database reachable again: SERVING");
      else if (changed) logger.warn({ reason: now }, "database unavailable: NOT_SERVING until a probe passes");
      down = now;
      health.dependency(DATABASE, down);
    },
  };
}
