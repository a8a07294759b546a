import { status } from "@grpc/grpc-js";
import { context } from "@opentelemetry/api";
import type { Logger } from "pino";
import type { ServiceMetrics } from "./metrics";
import { failSpan, startServerSpan } from "./trace";

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
  /** The trace id of the call (its server span's, continuing the caller's `traceparent`), for its log lines. */
  readonly traceId: string | undefined;
  /** Runs `fn` (the handler) inside the call's server span: its database spans and log lines join the trace. */
  run<T>(fn: () => T): T;
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
function statusName(code: status): string {
  return statusNames[code] ?? String(code);
}

/** Codes that mean the server failed (logged at warn); every other code is the caller's outcome. */
const SERVER_FAULTS = new Set<status>([status.INTERNAL, status.UNKNOWN, status.DATA_LOSS, status.UNIMPLEMENTED]);

/**
 * The observer of a service: counts `grpc_server_*` series, opens one OpenTelemetry SERVER span per
 * call (child of the caller's `traceparent`), and writes one access line per call (method, code,
 * duration, principal kind, request id, trace id). Expected refusals (a revoked credential, bad
 * input, a missing record) are info lines and ok spans; only server faults are warnings/errors.
 */
export function callObserver(metrics: ServiceMetrics, logger: Logger): CallObserver {
  return (call) => {
    const labels = { grpc_service: call.service, grpc_method: call.method, grpc_type: call.type };
    const streaming = call.type !== "unary";
    const began = process.hrtime.bigint();
    const {
      span,
      context: spanContext,
      traceId,
    } = startServerSpan(`${call.service}/${call.method}`, call.traceparent, {
      "rpc.system": "grpc",
      "rpc.service": call.service,
      "rpc.method": call.method,
    });
    let principalKind: string | undefined;
    let ended = false;
    // Looked up once per call: a stream counts every message into its method's tally (read at scrape).
    const sent = streaming ? metrics.sentTally(labels) : undefined;
    metrics.started.inc(labels);
    if (streaming) metrics.openStreams.inc(labels);
    return {
      traceId,
      run: (fn) => context.with(spanContext, fn),
      sent: () => {
        if (sent) sent.n += 1;
      },
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
        span.setAttribute("rpc.grpc.status_code", code);
        if (SERVER_FAULTS.has(code)) failSpan(span, statusName(code));
        span.end();
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
