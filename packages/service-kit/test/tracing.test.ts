// Tracing set up in this process: server spans continue the caller's trace, log lines written
// inside a span carry its ids, and spans reach a recording processor.
import { Writable } from "node:stream";
import { activeTraceFields, runInSpan, startServerSpan } from "@unimatrix/service-kit/observe";
import { recordSpans } from "@unimatrix/service-kit/testing";
import pino from "pino";

describe("tracing set up", () => {
  const recorder = recordSpans();
  afterAll(() => recorder.stop());

  it("a server span is the caller's child; what runs inside it logs its trace_id and span_id", () => {
    const trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    const span = startServerSpan("svc/Method", `00-${trace}-00f067aa0ba902b7-01`, { "rpc.method": "Method" });
    expect(span.traceId).toBe(trace);
    const spanId = span.span.spanContext().spanId;
    expect(span.traceparent).toBe(`00-${trace}-${spanId}-01`);
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const logger = pino({ mixin: activeTraceFields }, sink);
    runInSpan(span, () => logger.info("inside"));
    logger.info("outside");
    span.span.end();
    expect(lines.map((l) => [l.msg, l.trace_id, l.span_id])).toEqual([
      ["inside", trace, spanId],
      ["outside", undefined, undefined],
    ]);
    expect(recorder.trace(trace).map((s) => [s.name, s.parentSpanContext?.spanId])).toEqual([
      ["svc/Method", "00f067aa0ba902b7"],
    ]);
  });
});
