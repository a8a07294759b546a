import { context, propagation, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  type ReadableSpan,
  type Span,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-node";
import { PrismaInstrumentation, registerInstrumentations } from "@prisma/instrumentation";

/**
 * Fans spans out to the processors present now: the OTLP exporter when configured, and any a
 * test adds (an SDK provider's processors are fixed when it is built, tests come later). Drops
 * the traces a database operation starts on its own (background jobs: heal ticks, sweeps), which
 * would otherwise export a trace per query every second; queries inside a call are kept.
 */
class Fanout implements SpanProcessor {
  readonly processors = new Set<SpanProcessor>();
  readonly #background = new Set<string>();
  onStart(span: Span, parent: Parameters<SpanProcessor["onStart"]>[1]): void {
    const { traceId } = span.spanContext();
    if (!span.parentSpanContext && span.name.startsWith("prisma:")) this.#background.add(traceId);
    if (this.#background.has(traceId)) return;
    for (const processor of this.processors) processor.onStart(span, parent);
  }
  onEnd(span: ReadableSpan): void {
    const { traceId } = span.spanContext();
    if (this.#background.has(traceId)) {
      if (!span.parentSpanContext) this.#background.delete(traceId);
      return;
    }
    for (const processor of this.processors) processor.onEnd(span);
  }
  async forceFlush(): Promise<void> {
    await Promise.all([...this.processors].map((processor) => processor.forceFlush()));
  }
  async shutdown(): Promise<void> {
    await Promise.all([...this.processors].map((processor) => processor.shutdown()));
  }
}

let installed: { provider: NodeTracerProvider; fanout: Fanout; database: boolean } | undefined;

/** Whether the standard `OTEL_*` variables ask for spans to be exported over OTLP. */
export function otlpConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? "otlp").split(",").map((name) => name.trim().toLowerCase());
  if (!exporters.includes("otlp")) return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim());
}

/**
 * Sets up OpenTelemetry tracing for this process, once (later calls do nothing): the W3C trace
 * context propagator, async context, Prisma's database spans (when something receives spans),
 * and — only when the standard
 * `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT` is set — a batching OTLP/HTTP exporter that reads its
 * own settings (headers, timeout, compression, `OTEL_BSP_*`) from the same variables. Without
 * them spans still carry trace ids through calls and log lines, and nothing leaves the process.
 * `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` override `serviceName`; `OTEL_TRACES_SAMPLER`
 * picks the sampler (default: parent-based, always on); `OTEL_SDK_DISABLED=true` installs nothing.
 */
export function startTracing(serviceName = "unimatrix"): void {
  if (installed) return;
  // The specification's kill switch: no SDK at all (the API stays a no-op; ids still pass through).
  if (process.env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return;
  const fanout = new Fanout();
  if (otlpConfigured()) fanout.processors.add(new BatchSpanProcessor(new OTLPTraceExporter()));
  const resource = resourceFromAttributes({ "service.name": serviceName }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const provider = new NodeTracerProvider({ resource, spanProcessors: [fanout] });
  // The default context manager of Node: AsyncLocalStorage.
  provider.register({ propagator: new W3CTraceContextPropagator() });
  installed = { provider, fanout, database: false };
  if (fanout.processors.size > 0) traceDatabase();
}

/**
 * Turns on Prisma's spans (several per query), only once something will receive them: an OTLP
 * exporter, or a processor a test adds. Prisma reads its tracing helper per query, so clients
 * made earlier pick it up.
 */
function traceDatabase(): void {
  if (!installed || installed.database) return;
  installed.database = true;
  registerInstrumentations({ tracerProvider: installed.provider, instrumentations: [new PrismaInstrumentation()] });
}

/** Adds a span processor (tests: a SimpleSpanProcessor over an InMemorySpanExporter); returns its removal. */
export function addSpanProcessor(processor: SpanProcessor): () => void {
  startTracing();
  if (!installed) throw new Error("tracing is disabled (OTEL_SDK_DISABLED=true)");
  installed.fanout.processors.add(processor);
  traceDatabase();
  return () => installed?.fanout.processors.delete(processor);
}

/** Exports what is still buffered and stops tracing (at process exit). */
export async function stopTracing(): Promise<void> {
  const current = installed;
  if (!current) return;
  installed = undefined;
  await current.provider.shutdown();
  trace.disable();
  propagation.disable();
  context.disable();
}
