import {
  type Attributes,
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";

/** The W3C trace context header (https://www.w3.org/TR/trace-context/). */
export const TRACEPARENT_HEADER = "traceparent";

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The trace id of a `traceparent` value, or undefined for a missing or malformed one (all-zero ids are invalid). */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  const match = traceparent ? TRACEPARENT.exec(traceparent.trim()) : null;
  if (!match || match[1] === "ff") return undefined;
  const traceId = match[2]!;
  if (/^0+$/.test(traceId) || /^0+$/.test(match[3]!)) return undefined;
  return traceId;
}

/** The tracer of the kit's own spans (server calls, bus publishes); services may use their own. */
const kitTracer = () => trace.getTracer("@unimatrix/service-kit");

/** A span and the context that makes it the parent of what runs inside it. */
export interface ScopedSpan {
  readonly span: Span;
  readonly context: Context;
  /** The trace id for log lines: the span's, else the incoming one (tracing not set up), else none. */
  readonly traceId: string | undefined;
  /** The `traceparent` to send downstream so the next hop's spans are children of this one. */
  readonly traceparent: string | undefined;
}

/**
 * Starts a SERVER span continuing the caller's W3C `traceparent` (a new trace without one).
 * With no tracing set up (`startTracing`) the span records nothing and the caller's trace id and
 * traceparent pass through unchanged.
 */
export function startServerSpan(name: string, traceparent: string | undefined, attributes: Attributes): ScopedSpan {
  const incoming = traceIdOf(traceparent);
  const parent = incoming
    ? propagation.extract(ROOT_CONTEXT, { [TRACEPARENT_HEADER]: traceparent!.trim() })
    : ROOT_CONTEXT;
  const span = kitTracer().startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
  const scoped = trace.setSpan(parent, span);
  const own = span.spanContext();
  const valid = trace.isSpanContextValid(own);
  const carrier: Record<string, string> = {};
  if (valid) propagation.inject(scoped, carrier);
  return {
    span,
    context: scoped,
    traceId: valid ? own.traceId : incoming,
    traceparent: carrier[TRACEPARENT_HEADER] ?? (incoming ? traceparent!.trim() : undefined),
  };
}

/** Runs `fn` with `scoped` as the active span: what it starts (spans, calls, log lines) joins the trace. */
export function runInSpan<T>(scoped: ScopedSpan, fn: () => T): T {
  return context.with(scoped.context, fn);
}

/** Marks a span failed (a server fault) with a short description. */
export function failSpan(span: Span, message: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/** Runs `fn` inside a child span of the active one, ending it when `fn` settles (errors mark it failed). */
export async function inSpan<T>(
  name: string,
  kind: SpanKind,
  attributes: Attributes,
  fn: () => Promise<T>,
): Promise<T> {
  return kitTracer().startActiveSpan(name, { kind, attributes }, async (span) => {
    try {
      return await fn();
    } catch (error) {
      failSpan(span, (error as Error).message);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** The ids of the active span, for log lines (pino `mixin`); empty outside any span. */
export function activeTraceFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getSpan(context.active());
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  if (!trace.isSpanContextValid(span.spanContext())) return {};
  return { trace_id: traceId, span_id: spanId };
}

export { SpanKind };
