import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { addSpanProcessor } from "../observe/tracing";

/** Every span this process ends while recording, kept in memory for a test to inspect. */
export interface SpanRecorder {
  /** The spans ended so far, in the order they ended. */
  spans(): ReadableSpan[];
  /** The ended spans of one trace. */
  trace(traceId: string): ReadableSpan[];
  /** Stops recording. */
  stop(): void;
}

/**
 * Records the spans of everything started in this process (services, gateway, their database and
 * bus spans) in an InMemorySpanExporter. Start it before the system under test.
 */
export function recordSpans(): SpanRecorder {
  const exporter = new InMemorySpanExporter();
  const remove = addSpanProcessor(new SimpleSpanProcessor(exporter));
  return {
    spans: () => exporter.getFinishedSpans(),
    trace: (traceId) => exporter.getFinishedSpans().filter((span) => span.spanContext().traceId === traceId),
    stop() {
      remove();
      exporter.reset();
    },
  };
}
