import {
  activeTraceFields,
  otlpConfigured,
  runInSpan,
  startServerSpan,
  traceIdOf,
} from "@unimatrix/service-kit/observe";

describe("tracing configuration", () => {
  it("exports only when the standard OTLP endpoint variables are set, and never when disabled", () => {
    expect(otlpConfigured({})).toBe(false);
    expect(otlpConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: "" })).toBe(false);
    expect(otlpConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toBe(true);
    expect(otlpConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" })).toBe(true);
    expect(otlpConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })).toBe(false);
    expect(otlpConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" })).toBe(false);
  });
});

describe("server spans without tracing set up", () => {
  // This suite never calls startTracing: the API is a no-op, and ids must still pass through.
  const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

  it("keep the caller's trace id and traceparent, and log lines outside spans carry none", () => {
    const span = startServerSpan("x", traceparent, {});
    expect(span.traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    expect(span.traceparent).toBe(traceparent);
    expect(activeTraceFields()).toEqual({});
  });

  it("ignore a malformed traceparent", () => {
    expect(traceIdOf("00-00000000000000000000000000000000-00f067aa0ba902b7-01")).toBeUndefined();
    const span = startServerSpan("x", "garbage", {});
    expect(span.traceId).toBeUndefined();
    expect(span.traceparent).toBeUndefined();
    expect(runInSpan(span, () => activeTraceFields())).toEqual({});
  });
});
