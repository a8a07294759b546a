import { status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { ServiceMetrics } from "./metrics";
import { traceIdOf } from "./trace";

/** What the host knows of a call when it starts. */
export interface CallInfo {
  /** Fully qualified service, e.g. `unimatrix.cube.v1.ActivityService`. */
  readonly service: string;
  /** Method name as in the contract, e.g. `AppendEntry`. */
  readonly method: string;
  /** `unary`, `server_stream`, `client_stream` or `bidi_stream` (the go-grpc-prometheus names). */
  readonly type: string;
  readonly requestId: string;
  /** The W3C `traceparent` the caller sent, if any. */
  readonly traceparent: string | undefined;
}

/** One call being observed; the host reports what happens to it. */
export interface CallObservation {
  /** The trace id of the call (from the caller's `traceparent`), for its log lines. */
  readonly traceId: string | undefined;
  /** A stream message was written. */
  sent(): void;
  /** The caller was authenticated as this kind of principal. */
  principal(kind: string): void;
  /** The call ended with this status. */
  end(code: status): void;
}

/** Watches every call a host serves: RED metrics and one access log line per call. */
export type CallObserver = (call: CallInfo) => CallObservation;

const statusNames = Object.fromEntries(Object.entries(status).map(([name, code]) => [code, name])) as Record<
  number,
  string
>;

/** The conventional name of a status code (`OK`, `INVALID_ARGUMENT`, …). */
export function statusName(code: status): string {
  return statusNames[code] ?? String(code);
}

/** Codes that mean the server failed (logged at warn); every other code is the caller's outcome. */
const SERVER_FAULTS = new Set<status>([status.INTERNAL, status.UNKNOWN, status.DATA_LOSS, status.UNIMPLEMENTED]);

/**
 * The observer of a service: counts `grpc_server_*` series and writes one access line per call
 * (method, code, duration, principal kind, request id, trace id). Expected refusals (a revoked
 * credential, bad input, a missing record) are info lines; only server faults are warnings.
 */
export function callObserver(metrics: ServiceMetrics, logger: Logger): CallObserver {
  return (call) => {
    const labels = { grpc_service: call.service, grpc_method: call.method, grpc_type: call.type };
    const streaming = call.type !== "unary";
    const began = process.hrtime.bigint();
    const traceId = traceIdOf(call.traceparent);
    let principalKind: string | undefined;
    let ended = false;
    metrics.started.inc(labels);
    if (streaming) metrics.openStreams.inc(labels);
    return {
      traceId,
      sent: () => metrics.sent.inc(labels),
      principal(kind) {
        principalKind = kind;
      },
      end(code) {
        if (ended) return;
        ended = true;
        const seconds = Number(process.hrtime.bigint() - began) / 1e9;
        metrics.handled.inc({ ...labels, grpc_code: statusName(code) });
        metrics.handling.observe(labels, seconds);
        if (streaming) metrics.openStreams.dec(labels);
        const line = {
          method: `/${call.service}/${call.method}`,
          code: statusName(code),
          duration_ms: Math.round(seconds * 1e6) / 1e3,
          principal: principalKind,
          request_id: call.requestId,
          trace_id: traceId,
        };
        if (SERVER_FAULTS.has(code)) logger.warn(line, "call");
        else logger.info(line, "call");
      },
    };
  };
}
