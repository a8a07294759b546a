// One trace from the caller through the gateway into the cube and its database: the gateway's
// span continues the caller's traceparent, the cube's server span is its child, and the cube's
// database and bus spans are the cube span's descendants. Everything runs in this process, so an
// in-memory exporter sees every span.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-node";
import { RAW_QUERY_SPAN } from "@unimatrix/service-kit/store";
import { eventually, recordSpans, type SpanRecorder } from "@unimatrix/service-kit/testing";
import { call, connectJson, type System, seedTenant, startSystem } from "./system";

const CALLER_SPAN = "b7ad6b7169203331";
const APPEND = "unimatrix.cube.v1.ActivityService/AppendEntry";
const SERVER = 1; // SpanKind.SERVER

/** A fresh caller trace id per test, so the traces cannot mix. */
const traceId = () => crypto.randomUUID().replaceAll("-", "");

/** The chain of parents of a span inside its trace, nearest first. */
function ancestors(span: ReadableSpan, spans: readonly ReadableSpan[]): ReadableSpan[] {
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
  const chain: ReadableSpan[] = [];
  let parent = span.parentSpanContext && byId.get(span.parentSpanContext.spanId);
  while (parent) {
    chain.push(parent);
    parent = parent.parentSpanContext && byId.get(parent.parentSpanContext.spanId);
  }
  return chain;
}

/** Waits until the trace holds gateway → cube AppendEntry → database and bus spans, and checks the shape. */
async function expectAppendTrace(
  recorder: SpanRecorder,
  trace: string,
  gatewaySpan: string,
  /** The caller's span id, or null for a trace the gateway started. */
  callerSpan: string | null = CALLER_SPAN,
) {
  const find = () => {
    const spans = recorder.trace(trace);
    const cube = spans.find((s) => s.name === APPEND && s.kind === SERVER);
    const gateway = cube && spans.find((s) => s.spanContext().spanId === cube.parentSpanContext?.spanId);
    const below = (name: string) =>
      cube ? spans.filter((s) => s.name === name && ancestors(s, spans).includes(cube)) : [];
    return {
      spans,
      cube,
      gateway,
      queries: [...below("prisma:client:db_query"), ...below(RAW_QUERY_SPAN)],
      publishes: below("bus publish"),
    };
  };
  await eventually(() => {
    const found = find();
    return Boolean(found.gateway && found.queries.length > 0 && found.publishes.length > 0);
  }, `gateway → ${APPEND} → database spans in trace ${trace}`);
  const { cube, gateway, queries, publishes } = find();
  expect(gateway!.name).toBe(gatewaySpan);
  expect(gateway!.kind).toBe(SERVER);
  // The gateway span continues the caller's: its parent is the caller's span id (none: a new trace).
  expect(gateway!.parentSpanContext?.spanId).toBe(callerSpan ?? undefined);
  expect(cube!.attributes).toMatchObject({
    "rpc.system": "grpc",
    "rpc.method": "AppendEntry",
    "rpc.grpc.status_code": 0,
  });
  expect(queries.map((q) => q.attributes["db.system.name"])).toContain("postgresql");
  expect(queries.some((q) => /INSERT INTO/i.test(String(q.attributes["db.query.text"])))).toBe(true);
  expect(publishes[0]!.attributes["messaging.system"]).toBe("redis");
  return { cube: cube!, gateway: gateway! };
}

describe("gateway: one trace from the caller to the database", () => {
  let recorder: SpanRecorder;
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    recorder = recordSpans();
    system = await startSystem("gw_trace");
    acme = await seedTenant(system, "acme", 1);
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
    recorder?.stop();
  });

  it("an append through Connect: gateway → cube → database, under the caller's trace", async () => {
    const seat = await call<{ sessionToken: string }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: acme.cubeId, roleId: acme.roleId, hostname: "laptop" },
      acme.clients[0]!.token,
    );
    const trace = traceId();
    const answer = await connectJson(
      system,
      APPEND,
      { cubeId: acme.cubeId, message: "traced", visibility: "VISIBILITY_BROADCAST" },
      seat.sessionToken,
      { traceparent: `00-${trace}-${CALLER_SPAN}-01` },
    );
    expect(answer.status).toBe(200);
    await expectAppendTrace(recorder, trace, `POST /${APPEND}`);
  });

  it("an append through MCP (log_post): gateway → cube → database, under the caller's trace", async () => {
    const trace = traceId();
    const client = new Client({ name: "traced-agent", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${system.url}/mcp`), {
      requestInit: {
        headers: {
          authorization: `Bearer ${acme.clients[0]!.token}`,
          traceparent: `00-${trace}-${CALLER_SPAN}-01`,
        },
      },
    });
    await client.connect(transport);
    try {
      const attached = await client.callTool({
        name: "seat_attach",
        arguments: { cube_id: acme.cubeId, role_id: acme.roleId },
      });
      expect(attached.isError).toBeFalsy();
      const posted = await client.callTool({ name: "log_post", arguments: { message: "traced over mcp" } });
      expect(posted.isError).toBeFalsy();
      const refused = await client.callTool({ name: "log_ack", arguments: { entry_id: crypto.randomUUID() } });
      expect(refused.isError).toBe(true);
      // Tool calls are counted by tool and outcome; the session start is counted too.
      const metrics = await (await fetch(system.metricsUrl)).text();
      expect(metrics).toMatch(/^unimatrix_gateway_mcp_tool_calls_total\{tool="log_post",outcome="ok"\} 1$/m);
      expect(metrics).toMatch(/^unimatrix_gateway_mcp_tool_calls_total\{tool="seat_attach",outcome="ok"\} 1$/m);
      expect(metrics).toMatch(/^unimatrix_gateway_mcp_tool_calls_total\{tool="log_ack",outcome="not_found"\} 1$/m);
      expect(metrics).toMatch(/^unimatrix_gateway_mcp_sessions_total\{event="opened"\} 1$/m);
    } finally {
      await client.close();
    }
    await expectAppendTrace(recorder, trace, "POST /mcp");
  });

  it("a request without traceparent starts a new trace at the gateway", async () => {
    const before = new Set(recorder.spans().map((s) => s.spanContext().traceId));
    const seat = await call<{ sessionToken: string }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: acme.cubeId, roleId: acme.roleId, hostname: "untraced" },
      acme.clients[0]!.token,
    );
    const answer = await connectJson(
      system,
      APPEND,
      { cubeId: acme.cubeId, message: "untraced", visibility: "VISIBILITY_BROADCAST" },
      seat.sessionToken,
    );
    expect(answer.status).toBe(200);
    let root: ReadableSpan | undefined;
    await eventually(() => {
      root = recorder
        .spans()
        .find((s) => s.name === `POST /${APPEND}` && !before.has(s.spanContext().traceId) && !s.parentSpanContext);
      return root !== undefined;
    }, "a new gateway root span");
    await expectAppendTrace(recorder, root!.spanContext().traceId, `POST /${APPEND}`, null);
  });
});
