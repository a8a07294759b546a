import { AsyncLocalStorage } from "node:async_hooks";
import { runInSpan, type ScopedSpan } from "@unimatrix/service-kit/observe";

/** What the gateway knows of the HTTP request being served, for everything it calls on its behalf. */
export interface RequestContext {
  readonly requestId: string;
  /** The gateway span's W3C `traceparent` (continuing the caller's), sent upstream so the services' spans are its children. */
  readonly traceparent: string | undefined;
  readonly traceId: string | undefined;
  /** The Connect/gRPC outcome (`ok`, `invalid_argument`, …) once known; labels the access line and metrics. */
  code?: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** Runs `fn` as part of the request described by `context`, inside its gateway span. */
export function withRequestContext<T>(context: RequestContext, span: ScopedSpan, fn: () => T): T {
  return storage.run(context, () => runInSpan(span, fn));
}

/** The request being served, if any (calls made from timers have none). */
export function currentRequest(): RequestContext | undefined {
  return storage.getStore();
}

/** Builds the context of a request from its id and its gateway span. */
export function requestContextOf(requestId: string, span: ScopedSpan): RequestContext {
  return { requestId, traceparent: span.traceparent, traceId: span.traceId };
}

/** Records the request's Connect/gRPC outcome. */
export function recordOutcome(code: string): void {
  const context = storage.getStore();
  if (context) context.code = code;
}
