import { Metadata, type ServiceError, status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { DomainError, StoreAnomalyError } from "../errors";
import { isDatabaseUnavailable } from "../store/unavailable";
import { isOutOfRange, isTransactionTimeout, isUniqueViolation } from "../store/unique";

/** A caller-facing status: a gRPC code (Connect uses the same numbers) and a message safe to show. */
export interface Status {
  readonly code: status;
  readonly message: string;
}

/** The status a caller receives for an error thrown by a handler (with the trailing metadata grpc-js wants). */
export interface CallStatus {
  readonly code: status;
  readonly details: string;
  readonly metadata: Metadata;
}

/** True for an error that came back from another gRPC call (it carries its own status). */
export function isServiceError(error: unknown): error is ServiceError {
  return (
    error instanceof Error &&
    typeof (error as Partial<ServiceError>).code === "number" &&
    (error as Partial<ServiceError>).metadata instanceof Metadata
  );
}

/** A Connect error (the gateway's own, from @connectrpc/connect) recognised by shape: the kit does not depend on Connect. */
function connectStatus(error: unknown): Status | undefined {
  const e = error as { name?: unknown; code?: unknown; rawMessage?: unknown } | null;
  if (e?.name !== "ConnectError" || typeof e.code !== "number" || typeof e.rawMessage !== "string") return undefined;
  return { code: e.code as status, message: e.rawMessage };
}

/**
 * THE error → status mapping, used by the gRPC host and the gateway's Connect, SSE and MCP surfaces:
 * - domain errors (incl. `ShutdownReason` → UNAVAILABLE) keep their code and message;
 * - statuses from downstream gRPC calls and Connect errors pass through;
 * - an uncaught unique violation is ALREADY_EXISTS, a value out of range for its column
 *   INVALID_ARGUMENT (the contract's ranges are the first line), a Prisma transaction timeout UNAVAILABLE,
 *   a `StoreAnomalyError` ABORTED (each retryable or final, never INTERNAL);
 * - a database that cannot serve now (unreachable, restarting, connection dropped, read-only, out of
 *   connections: `isDatabaseUnavailable`) is UNAVAILABLE, whichever surface the call came through;
 * - anything else is INTERNAL with a generic message.
 * With a logger, what the caller does not see (anomalies, INTERNAL causes) is logged.
 */
export function toStatus(error: unknown, logger?: Logger, method?: string): Status {
  if (error instanceof DomainError) return { code: error.code, message: error.message };
  if (isServiceError(error)) return { code: error.code, message: error.details };
  const connect = connectStatus(error);
  if (connect) return connect;
  if (error instanceof StoreAnomalyError) {
    logger?.warn({ err: error, method }, "store anomaly; caller told to retry");
    return { code: status.ABORTED, message: "the request conflicted with a concurrent change; retry" };
  }
  if (isUniqueViolation(error)) return { code: status.ALREADY_EXISTS, message: "a record with these values exists" };
  if (isOutOfRange(error)) {
    logger?.warn({ err: error, method }, "a value out of range reached the store; the contract should refuse it");
    return { code: status.INVALID_ARGUMENT, message: "request: a value is out of range" };
  }
  if (isTransactionTimeout(error)) {
    logger?.warn({ err: error, method }, "transaction timed out");
    return { code: status.UNAVAILABLE, message: "the store is busy; retry" };
  }
  if (isDatabaseUnavailable(error)) {
    // Debug only: an outage fails every call (the readiness probe logs it once, the access log counts them).
    logger?.debug({ method, reason: reasonOf(error) }, "database unavailable; caller told to retry");
    return { code: status.UNAVAILABLE, message: "the database is unavailable; retry" };
  }
  logger?.error({ err: error, method }, "unhandled error in handler");
  return { code: status.INTERNAL, message: "internal error" };
}

/** The last non-empty line of an error's message: the cause (Prisma's begin with the invocation and its source). */
function reasonOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const lines = message.split("\n").filter((line) => line.trim() !== "");
  return lines.at(-1) ?? message;
}

/** `toStatus` in the shape grpc-js's callbacks and stream errors take. */
export function toCallStatus(error: unknown, logger: Logger, method: string): CallStatus {
  const { code, message } = toStatus(error, logger, method);
  return { code, details: message, metadata: new Metadata() };
}
