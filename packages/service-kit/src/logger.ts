import { randomUUID } from "node:crypto";
import pino, { type Logger } from "pino";
import { activeTraceFields } from "./observe/trace";

export type { Logger } from "pino";

/**
 * The JSON logger of one service: one line per event, `service` on every line, and the active
 * span's `trace_id` / `span_id` on every line written inside a traced call.
 */
export function createLogger(service: string, level = process.env.LOG_LEVEL ?? "info"): Logger {
  return pino({ level, base: { service }, timestamp: pino.stdTimeFunctions.isoTime, mixin: activeTraceFields });
}

/** A logger that writes nothing; for tests that do not look at logs. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

/** The metadata key that carries a request id from the edge through every service. */
export const REQUEST_ID_HEADER = "x-request-id";

/** A request id: the caller's when it is sane, a new one otherwise. */
export function requestIdFrom(incoming: string | undefined): string {
  if (incoming && /^[A-Za-z0-9._:-]{1,128}$/.test(incoming)) return incoming;
  return randomUUID();
}
