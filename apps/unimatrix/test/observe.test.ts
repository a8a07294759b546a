// Operating the system: each process's metrics on its own port (never the public one), one access
// line per call, and the caller's W3C trace id in the log lines of the gateway and the service it
// reached. Real processes (`npm start`'s entry point) on Postgres and Redis, driven over Connect.
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import {
  eventually,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  testBusPrefix,
  uniqueName,
} from "@unimatrix/service-kit/testing";
import pg from "pg";

const root = join(__dirname, "..", "..", "..");
const main = join(root, "apps", "unimatrix", "dist", "main.js");
const OPERATOR = "umx_operator_observe-test-0123456789";
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

interface Up {
  readonly child: ChildProcessWithoutNullStreams;
  readonly ports: Record<string, { port: number; metrics: number }>;
  readonly lines: () => Record<string, unknown>[];
}

async function start(env: NodeJS.ProcessEnv): Promise<Up> {
  const child = spawn(process.execPath, [main], {
    cwd: root,
    env: {
      ...process.env,
      ...Object.fromEntries(
        ["CUBE", "DEVICE", "PRESENCE", "GATEWAY"].flatMap((s) => [
          [`${s}_PORT`, "0"],
          [`${s}_METRICS_PORT`, "0"],
        ]),
      ),
      LOG_LEVEL: "info",
      UMX_OPERATOR_TOKEN: OPERATOR,
      ...env,
    },
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const ports = await new Promise<Up["ports"]>((resolve, reject) => {
    const timer = setInterval(() => {
      const found: Up["ports"] = {};
      for (const m of output.matchAll(
        /^ {2}(cube|device|presence|gateway)\s+\w+:\/\/127\.0\.0\.1:(\d+)\s+metrics http:\/\/127\.0\.0\.1:(\d+)\/metrics$/gm,
      ))
        found[m[1]!] = { port: Number(m[2]), metrics: Number(m[3]) };
      if (Object.keys(found).length === 4) {
        clearInterval(timer);
        resolve(found);
      }
    }, 50);
    child.once("exit", (code) => {
      clearInterval(timer);
      reject(new Error(`exited with ${code}:\n${output}`));
    });
  });
  const lines = () =>
    output
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { child, ports, lines };
}

describe("operating it: metrics, access lines and trace ids", () => {
  const database = uniqueName("umx_observe");
  let admin: pg.Client;
  let up: Up;
  let gateway: string;
  // A stand-in OTLP/HTTP collector: what the processes export when OTEL_EXPORTER_OTLP_ENDPOINT is set.
  let collector: Server;
  const exported: { path: string; body: Buffer }[] = [];

  const call = async <T>(path: string, body: unknown, token: string): Promise<T> => {
    const response = await fetch(`${gateway}/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}`, traceparent: TRACEPARENT },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${path}: ${response.status} ${text}`);
    return JSON.parse(text) as T;
  };
  const scrape = async (port: number) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    const url = new URL(TEST_DATABASE_URL);
    url.pathname = `/${database}`;
    collector = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        exported.push({ path: request.url ?? "", body: Buffer.concat(chunks) });
        response.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", resolve));
    up = await start({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
      OTEL_BSP_SCHEDULE_DELAY: "100",
      DATABASE_URL: url.toString(),
      REDIS_URL: TEST_REDIS_URL,
      UMX_BUS_PREFIX: testBusPrefix("observe"),
      UMX_INTERNAL_KEY: "observe-test-internal-key-0123456789abcdef",
    });
    gateway = `http://127.0.0.1:${up.ports.gateway!.port}`;
  }, 120_000);

  afterAll(async () => {
    if (up) {
      const exited = once(up.child, "exit");
      up.child.kill("SIGTERM");
      await exited;
    }
    await new Promise<void>((resolve) => collector?.close(() => resolve()));
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });

  test("one Connect append shows in every service's grpc_server_handled_total and the gateway's route; /metrics is not public", async () => {
    const tenant = await call<{ adminUserToken: string }>(
      "unimatrix.cube.v1.IdentityService/CreateTenant",
      { name: "observe", adminDisplayName: "admin" },
      OPERATOR,
    );
    const user = tenant.adminUserToken;
    const cube = await call<{ cube: { id: string } }>(
      "unimatrix.cube.v1.CubeService/CreateCube",
      { requestKey: crypto.randomUUID(), name: "c", directive: "d" },
      user,
    );
    await call(
      "unimatrix.cube.v1.CubeService/CreateRole",
      { cubeId: cube.cube.id, name: "w", isDefault: true, canBroadcast: true, roleClass: "ROLE_CLASS_WORKER" },
      user,
    );
    const client = await call<{ client: { id: string }; token: string }>(
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name: "agent" },
      user,
    );
    await call(
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: client.client.id, cubeId: cube.cube.id, access: "CUBE_ACCESS_WRITE" },
      user,
    );
    const seat = await call<{ sessionToken: string }>(
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: cube.cube.id },
      client.token,
    );
    const appended = await fetch(`${gateway}/unimatrix.cube.v1.ActivityService/AppendEntry`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${seat.sessionToken}`,
        traceparent: TRACEPARENT,
      },
      body: JSON.stringify({ cubeId: cube.cube.id, message: "hello, metrics", visibility: "VISIBILITY_BROADCAST" }),
    });
    expect(appended.status).toBe(200);
    const requestId = appended.headers.get("x-request-id");
    expect(requestId).toMatch(/^[A-Za-z0-9._-]{8,}$/);

    const cubeMetrics = await scrape(up.ports.cube!.metrics);
    expect(cubeMetrics).toMatch(
      /grpc_server_handled_total\{grpc_service="unimatrix\.cube\.v1\.ActivityService",grpc_method="AppendEntry",grpc_type="unary",grpc_code="OK",service="cube"\} 1\b/,
    );
    expect(cubeMetrics).toMatch(/grpc_server_started_total\{[^}]*grpc_method="AppendEntry"[^}]*\} 1\b/);
    expect(cubeMetrics).toMatch(/grpc_server_handling_seconds_count\{[^}]*grpc_method="AppendEntry"[^}]*\} 1\b/);
    expect(cubeMetrics).toMatch(/^process_cpu_user_seconds_total\{service="cube"\} /m);
    // Every process has its own metrics port; device and presence serve their (health) RPCs there.
    for (const service of ["device", "presence"]) {
      expect(await scrape(up.ports[service]!.metrics)).toMatch(/^nodejs_heap_size_used_bytes\{service="\w+"\} /m);
    }
    const gatewayMetrics = await scrape(up.ports.gateway!.metrics);
    expect(gatewayMetrics).toMatch(
      /unimatrix_gateway_requests_total\{route="\/unimatrix\.cube\.v1\.ActivityService\/AppendEntry",method="POST",code="200",rpc_code="ok"\} 1\b/,
    );
    // The gateway's process series, and the time until its answer started (for streams: until they opened).
    expect(gatewayMetrics).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(gatewayMetrics).toMatch(/^nodejs_heap_size_used_bytes \d+/m);
    expect(gatewayMetrics).toMatch(
      /^unimatrix_gateway_response_start_seconds_count\{route="\/unimatrix\.cube\.v1\.ActivityService\/AppendEntry",method="POST"\} 1$/m,
    );
    // The public port does not serve metrics.
    expect((await fetch(`${gateway}/metrics`)).status).toBe(404);
    // A refusal is labelled by its Connect code, not only its HTTP status.
    await fetch(`${gateway}/unimatrix.cube.v1.ActivityService/AppendEntry`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${seat.sessionToken}` },
      body: JSON.stringify({ cubeId: "not-a-uuid", message: "x", visibility: "VISIBILITY_BROADCAST" }),
    });
    expect(await scrape(up.ports.gateway!.metrics)).toMatch(
      /unimatrix_gateway_requests_total\{route="\/unimatrix\.cube\.v1\.ActivityService\/AppendEntry",method="POST",code="400",rpc_code="invalid_argument"\} 1\b/,
    );
    expect(await scrape(up.ports.cube!.metrics)).toMatch(/grpc_code="INVALID_ARGUMENT"[^}]*\} 1\b/);

    // What the services stand on: the pool, the bus, the live feed, open links (bounded labels).
    const stands = await scrape(up.ports.cube!.metrics);
    expect(stands).toMatch(/^unimatrix_db_pool_connections\{state="in_use",service="cube"\} \d+$/m);
    expect(stands).toMatch(/^unimatrix_db_pool_connections\{state="idle",service="cube"\} [1-9]\d*$/m);
    expect(stands).toMatch(/^unimatrix_db_pool_waiting\{service="cube"\} 0$/m);
    expect(stands).toMatch(/^unimatrix_bus_publish_failures_total\{service="cube"\} 0$/m);
    expect(stands).toMatch(/^unimatrix_bus_reconnects_total\{service="cube"\} 0$/m);
    expect(stands).toMatch(/^unimatrix_bus_up\{service="cube"\} 1$/m);
    expect(stands).toMatch(/^unimatrix_db_up\{service="cube"\} 1$/m);
    expect(stands).toMatch(/^unimatrix_feed_listeners\{service="cube"\} 0$/m);
    expect(stands).toMatch(/^unimatrix_feed_backlog_items\{service="cube"\} 0$/m);
    const presence = await scrape(up.ports.presence!.metrics);
    expect(presence).toMatch(/^unimatrix_presence_open_links\{service="presence"\} 0$/m);
    expect(presence).toMatch(/^unimatrix_feed_drains_total\{service="presence"\} \d+$/m);

    // One access line per call, carrying the trace id, in the gateway and in the service it reached.
    const lines = up.lines();
    const gatewayLine = lines.find(
      (l) =>
        l.log === "access" &&
        l.route === "/unimatrix.cube.v1.ActivityService/AppendEntry" &&
        l.request_id === requestId,
    );
    expect(gatewayLine).toMatchObject({ status: 200, code: "ok", trace_id: TRACE_ID });
    const cubeLine = lines.find(
      (l) =>
        l.log === "access" &&
        l.method === "/unimatrix.cube.v1.ActivityService/AppendEntry" &&
        l.request_id === requestId,
    );
    expect(cubeLine).toMatchObject({ code: "OK", principal: "drone-session", trace_id: TRACE_ID, service: "cube" });
    expect(typeof cubeLine?.duration_ms).toBe("number");
  });

  test("spans of the caller's trace reach the OTLP endpoint the standard OTEL_* variables name", async () => {
    // The OTLP/HTTP exporter posts JSON to <endpoint>/v1/traces, trace ids in hex; the spans of
    // one trace may come in several batches (each process exports its own).
    const names = [
      "POST /unimatrix.cube.v1.ActivityService/AppendEntry",
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      "prisma:client:db_query",
      "bus publish",
    ];
    const missing = () => {
      const traced = exported.filter((e) => e.path === "/v1/traces" && e.body.includes(TRACE_ID));
      const bodies = Buffer.concat(traced.map((e) => e.body));
      return names.filter((name) => !bodies.includes(Buffer.from(`"name":"${name}"`)));
    };
    await eventually(() => missing().length === 0, "OTLP exports holding the caller's trace", 10_000).catch(() => {
      throw new Error(`not exported: ${missing().join(", ")}`);
    });
    expect(missing()).toEqual([]);
  });
});
