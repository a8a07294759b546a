import { AsyncLocalStorage } from "node:async_hooks";
import { traceIdOf } from "@unimatrix/service-kit";

/** What the gateway knows of the HTTP request being served, for everything it calls on its behalf. */
export interface RequestContext {
  readonly requestId: string;
  /** The caller's W3C `traceparent`, forwarded upstream so the services' spans and logs join the trace. */
  readonly traceparent: string | undefined;
  readonly traceId: string | undefined;
  /** The Connect/gRPC outcome (`ok`, `invalid_argument`, …) once known; labels the access line and metrics. */
  code?: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** Runs `fn` as part of the request described by `context`. */
export function withRequestContext<T>(context: RequestContext, fn: () => T): T {
  return storage.run(context, fn);
}

/** The request being served, if any (calls made from timers have none). */
export function currentRequest(): RequestContext | undefined {
  return storage.getStore();
}

/** Builds the context of a request from its headers. */
export function requestContextOf(requestId: string, traceparent: string | undefined): RequestContext {
  return { requestId, traceparent, traceId: traceIdOf(traceparent) };
}

/** Records the request's Connect/gRPC outcome. */
export function recordOutcome(code: string): void {
  const context = storage.getStore();
  if (context) context.code = code;
}
