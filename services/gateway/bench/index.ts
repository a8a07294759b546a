// Gateway benchmark, every figure next to its baseline from the same run:
//  1. unary: Connect JSON through the gateway vs the same call straight to the cube service over
//     gRPC vs a bare HTTP echo server (the floor of an HTTP round trip from this client);
//  2. SSE fan-out growth: 100, 1,000, 2,000, 5,000 open streams on one gateway (as many as the
//     machine holds), append→delivery latency at a fixed append rate, every delivery checked to
//     arrive exactly once on every stream; beside each step its floor, the same readers and rate
//     against a bare SSE server (bench/sse-floor.ts: one pg INSERT + Redis publish per entry);
//  3. the MCP token economy (mcp-economy.ts): a scripted agent session's calls and characters;
//  4. the MCP agent path (mcp-path.ts): log_post beside Connect, post → listen, post → log_wait.
// Prints `BENCH` lines. `BENCH_ONLY=path`: only the agent path (4), e.g. to profile it alone.
// The system (four services on Postgres + Redis) runs in a child process, as `npm start` runs it,
// so the client's CPU is not the server's.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { SERVICE_NAMES } from "@unimatrix/app";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { PRINCIPAL_HEADER, signPrincipal } from "@unimatrix/service-kit/auth";
import { createClient } from "@unimatrix/service-kit/grpc";
import {
  bench,
  benchSeconds,
  loadAverage,
  readSseFrames,
  type SpawnedSystem,
  spawnSystem,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  testBusPrefix,
  uniqueName,
} from "@unimatrix/service-kit/testing";
import { Redis } from "ioredis";
import pg from "pg";
import { mcpEconomy, printEconomy } from "./mcp-economy";
import { mcpPath } from "./mcp-path";

const OPERATOR = "umx_operator_gatewaybench_0123456789abcdef";
const KEY = "gateway-bench-internal-key-0123456789abcdef";
const CALLS = Number(process.env.BENCH_CALLS ?? 3_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const STREAM_STEPS = (process.env.BENCH_STREAMS ?? "100,1000,2000,5000").split(",").map(Number);
const RATE = Number(process.env.BENCH_RATE ?? 10);
const ONLY = process.env.BENCH_ONLY;
const SECONDS = benchSeconds(5);
let failed = false;

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const fmt = (n: number, d = 2) => n.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });

/** Runs `total` calls on `workers` concurrent loops; returns per-call latencies and throughput. */
async function measure(total: number, workers: number, work: () => Promise<void>) {
  const latencies: number[] = [];
  let next = 0;
  const started = nowMs();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next++ < total) {
        const t = nowMs();
        await work();
        latencies.push(nowMs() - t);
      }
    }),
  );
  const perSecond = total / ((nowMs() - started) / 1000);
  latencies.sort((a, b) => a - b);
  return { p50: pct(latencies, 50), p99: pct(latencies, 99), perSecond };
}

function startSystem(database: string): Promise<SpawnedSystem> {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${database}`;
  const root = join(__dirname, "..", "..", "..");
  return spawnSystem({
    entry: join(root, "apps", "unimatrix", "dist", "main.js"),
    cwd: root,
    services: SERVICE_NAMES,
    env: {
      DATABASE_URL: url.toString(),
      REDIS_URL: TEST_REDIS_URL,
      UMX_BUS_PREFIX: testBusPrefix("bench-gw"),
      UMX_INTERNAL_KEY: KEY,
      UMX_OPERATOR_TOKEN: OPERATOR,
      GATEWAY_RATE_LIMIT_PER_SECOND: "0",
      CUBE_LIVENESS_INTERVAL_MS: "0",
    },
    echo: true,
  });
}

/** One step of an SSE growth series. */
interface SseStep {
  asked: number;
  held: number;
  openSeconds: number;
  delivered: number;
  expected: number;
  missing: number;
  duplicates: number;
  p50: number;
  p99: number;
  max: number;
}

/**
 * Opens SSE streams at `url` up to each of STREAM_STEPS (ten per reader token, the per-credential
 * cap), appends RATE entries/s for SECONDS per step through `append`, and times each entry from
 * just before its append to its frame on every stream, checking each arrives exactly once.
 */
async function sseSeries(target: {
  url: string;
  readers(count: number): Promise<string[]>;
  append(message: string): Promise<unknown>;
}): Promise<SseStep[]> {
  const series = Math.random().toString(36).slice(2, 8);
  const sent = new Map<string, number>();
  const latencies: number[] = [];
  let duplicates = 0;
  let ready = 0;
  const streams: { controller: AbortController; seen: Set<string> }[] = [];
  const open = async (token: string) => {
    const controller = new AbortController();
    const seen = new Set<string>();
    streams.push({ controller, seen });
    await readSseFrames(target.url, token, controller.signal, (frame) => {
      if (frame.includes("event: ready")) ready++;
      const message = /"message":"(bench-[a-z0-9]+-\d+-\d+)"/.exec(frame)?.[1];
      const at = message ? sent.get(message) : undefined;
      if (message && at !== undefined) {
        if (seen.has(message)) duplicates++;
        seen.add(message);
        latencies.push(nowMs() - at);
      }
    });
  };
  const opening: Promise<void>[] = [];
  const steps: SseStep[] = [];
  for (const asked of STREAM_STEPS) {
    const tokens = await target.readers(Math.ceil(asked / 10));
    const openStarted = nowMs();
    for (let i = streams.length; i < asked; i++) opening.push(open(tokens[Math.floor(i / 10)]!).catch(() => {}));
    while (ready < asked && nowMs() - openStarted < 60_000) await new Promise((r) => setTimeout(r, 50));
    const openSeconds = (nowMs() - openStarted) / 1000;
    const held = ready;
    for (const st of streams) st.seen.clear();
    latencies.length = 0;
    const duplicatesBefore = duplicates;
    const total = RATE * SECONDS;
    const stepStarted = nowMs();
    for (let i = 0; i < total; i++) {
      const wait = stepStarted + (i * 1000) / RATE - nowMs();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const message = `bench-${series}-${asked}-${i}`;
      sent.set(message, nowMs());
      await target.append(message);
    }
    const expected = total * held;
    const waitUntil = nowMs() + 30_000;
    while (latencies.length < expected && nowMs() < waitUntil) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 200)); // a late duplicate would land here
    const missing = streams.reduce((n, st) => n + Math.max(0, total - st.seen.size), 0);
    latencies.sort((a, b) => a - b);
    steps.push({
      asked,
      held,
      openSeconds,
      delivered: latencies.length,
      expected,
      missing,
      duplicates: duplicates - duplicatesBefore,
      p50: pct(latencies, 50),
      p99: pct(latencies, 99),
      max: latencies.at(-1) ?? Number.NaN,
    });
    if (held < asked) break; // the machine did not hold this many; report what it held
  }
  for (const st of streams) st.controller.abort();
  await Promise.all(opening);
  return steps;
}

/**
 * Starts bench/sse-floor.ts in its own process on a table of `database`; `append` inserts and
 * publishes one entry. Its frames are `entry` (the gateway's JSON of one real entry) with their own
 * cursor and message, so readers parse as many bytes per frame on both sides.
 */
async function startSseFloor(database: string, entry: Record<string, unknown>) {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${database}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 4 });
  await pool.query("CREATE TABLE sse_floor (id bigserial PRIMARY KEY, message text NOT NULL, at timestamptz NOT NULL)");
  const channel = `${testBusPrefix("bench-sse-floor")}:entries`;
  const child = spawn(process.execPath, [...process.execArgv, join(__dirname, "sse-floor.ts")], {
    env: { ...process.env, BENCH_CHANNEL: channel, BENCH_ENTRY: JSON.stringify(entry) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const m = /PORT (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once("exit", (code) => reject(new Error(`sse floor exited with ${code}`)));
  });
  const publisher = new Redis(TEST_REDIS_URL);
  return {
    url: `http://127.0.0.1:${port}/events`,
    async append(message: string) {
      const row = await pool.query("INSERT INTO sse_floor (message, at) VALUES ($1, now()) RETURNING id", [message]);
      await publisher.publish(channel, JSON.stringify({ cursor: String(row.rows[0].id), message }));
    },
    async stop() {
      publisher.disconnect();
      child.kill("SIGTERM");
      await once(child, "exit");
      await pool.end();
    },
  };
}

async function main() {
  const database = uniqueName("bench_gateway");
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  const { child, ports, metricsPorts } = await startSystem(database);
  const gateway = `http://127.0.0.1:${ports.gateway}`;
  const echo = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}'));
  });
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
  const echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/echo`;
  try {
    const call = async <T>(path: string, body: unknown, token: string): Promise<T> => {
      const response = await fetch(`${gateway}/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify(body),
      });
      if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
      return (await response.json()) as T;
    };
    // Under load the gateway may answer 503 before forwarding (its credential lookup timed out):
    // nothing was written, so the append is sent again (the exactly-once check would see a double).
    let retried = 0;
    const callRetrying = async <T>(path: string, body: unknown, token: string): Promise<T> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await call<T>(path, body, token);
        } catch (error) {
          if (attempt >= 5 || !String(error).includes(": 503 ")) throw error;
          retried++;
          await new Promise((r) => setTimeout(r, 200 * attempt));
        }
      }
    };
    const tenant = await call<{ adminUserToken: string; adminUser: { id: string }; tenant: { id: string } }>(
      "unimatrix.cube.v1.IdentityService/CreateTenant",
      { name: "bench", adminDisplayName: "bench" },
      OPERATOR,
    );
    const user = tenant.adminUserToken;
    const { cube } = await call<{ cube: { id: string } }>(
      "unimatrix.cube.v1.CubeService/CreateCube",
      { requestKey: crypto.randomUUID(), name: "bench", directive: "measure" },
      user,
    );

    if (ONLY === "path") {
      await mcpPath(gateway, OPERATOR, `http://127.0.0.1:${metricsPorts.gateway}/metrics`);
      return;
    }
    // 3 (first: it is short and needs a quiet system). The MCP token economy.
    printEconomy(await mcpEconomy(gateway, OPERATOR), await mcpEconomy(gateway, OPERATOR, "2026-07-28"));
    // 4 (also on a quiet system). The agent path.
    await mcpPath(gateway, OPERATOR, `http://127.0.0.1:${metricsPorts.gateway}/metrics`);

    // 1. Unary.
    const body = JSON.stringify({ cubeId: cube.id });
    const headers = { "content-type": "application/json", authorization: `Bearer ${user}` };
    const viaGateway = () =>
      fetch(`${gateway}/unimatrix.cube.v1.CubeService/GetCube`, { method: "POST", headers, body })
        .then((r) => r.arrayBuffer())
        .then(() => {});
    const bare = () =>
      fetch(echoUrl, { method: "POST", headers, body })
        .then((r) => r.arrayBuffer())
        .then(() => {});
    const direct = createClient(CubeService, `127.0.0.1:${ports.cube}`);
    const principal = { kind: "user" as const, subjectId: tenant.adminUser.id, tenantId: tenant.tenant.id };
    const viaGrpc = () =>
      direct
        .getCube({ cubeId: cube.id }, { metadata: { [PRINCIPAL_HEADER]: signPrincipal(principal, KEY) } })
        .then(() => {});
    for (const warm of [viaGateway, bare, viaGrpc]) await measure(300, 4, warm);
    const rows: [string, Awaited<ReturnType<typeof measure>>, Awaited<ReturnType<typeof measure>>][] = [];
    for (const [name, fn] of [
      ["gateway (Connect JSON → gRPC)", viaGateway],
      ["cube direct (gRPC)", viaGrpc],
      ["bare HTTP echo (same client)", bare],
    ] as const) {
      rows.push([name, await measure(CALLS, 1, fn), await measure(CALLS, CONCURRENCY, fn)]);
    }
    direct.close();
    process.stdout.write(`\nUnary GetCube, ${CALLS} calls each (sequential | ${CONCURRENCY} in flight)\n`);
    process.stdout.write(
      "| path | p50 ms | p99 ms | calls/s | p50 ms | p99 ms | calls/s |\n|---|---|---|---|---|---|---|\n",
    );
    for (const [name, seq, par] of rows) {
      process.stdout.write(
        `| ${name} | ${fmt(seq.p50)} | ${fmt(seq.p99)} | ${fmt(seq.perSecond, 0)} | ${fmt(par.p50)} | ${fmt(par.p99)} | ${fmt(par.perSecond, 0)} |\n`,
      );
    }
    const added = rows[0]![1].p50 - rows[1]![1].p50;
    process.stdout.write(`gateway adds ${fmt(added)} ms p50 over the direct gRPC call (target ≤ 1 ms)\n`);

    // 2. SSE fan-out growth: streams are added up to each step (the cube allows 10 streams per
    // credential, so one READ client per 10 streams); at each step RATE appends/s for SECONDS,
    // and every stream must receive every append of the step exactly once.
    const writer = await call<{ client: { id: string }; token: string }>(
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name: "writer" },
      user,
    );
    await call(
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: writer.client.id, cubeId: cube.id, access: "CUBE_ACCESS_WRITE" },
      user,
    );
    const { role } = await call<{ role: { id: string } }>(
      "unimatrix.cube.v1.CubeService/CreateRole",
      { cubeId: cube.id, name: "writer", isDefault: true, canBroadcast: true },
      user,
    );
    const { sessionToken } = await call<{ sessionToken: string }>(
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: cube.id, roleId: role.id },
      writer.token,
    );
    const clients: string[] = [];
    const readers = async (count: number) => {
      while (clients.length < count) {
        const issued = await callRetrying<{ client: { id: string }; token: string }>(
          "unimatrix.cube.v1.IdentityService/IssueClient",
          { name: `reader-${clients.length}` },
          user,
        );
        await callRetrying(
          "unimatrix.cube.v1.IdentityService/SetCubeGrant",
          { clientId: issued.client.id, cubeId: cube.id, access: "CUBE_ACCESS_READ" },
          user,
        );
        clients.push(issued.token);
      }
      return clients;
    };
    const steps = await sseSeries({
      url: `${gateway}/v1/cubes/${cube.id}/events`,
      readers,
      append: (message) =>
        callRetrying(
          "unimatrix.cube.v1.ActivityService/AppendEntry",
          { cubeId: cube.id, message, visibility: "VISIBILITY_BROADCAST" },
          sessionToken,
        ),
    });
    // The SSE floor: the same readers and rate against a bare Node HTTP server in its own process
    // (bench/sse-floor.ts) that writes each entry's frame, built once, to every open response; the
    // entry is one raw pg INSERT and one Redis publish away, as an append is. No auth, no gRPC hop.
    // Its frames carry the gateway's own entry JSON (one real entry, read back), with their own message.
    const read = await call<{ items: { entry?: Record<string, unknown> }[] }>(
      "unimatrix.cube.v1.ActivityService/ReadActivity",
      { cubeId: cube.id },
      user,
    );
    const shape = read.items.map((item) => item.entry).find((entry) => entry !== undefined) ?? {};
    const floor = await startSseFloor(database, shape);
    const floorSteps = await sseSeries({
      url: floor.url,
      readers: async (count) => Array.from({ length: count }, (_, i) => `floor-${i}`),
      append: floor.append,
    });
    await floor.stop();
    process.stdout.write(
      `\nSSE fan-out growth, ${RATE} appends/s for ${SECONDS} s per step (load ${loadAverage()})\n` +
        "| streams asked | held | ready in s | deliveries (exactly once) | p50 ms | p99 ms | max ms | floor held | floor p50 ms | floor p99 ms |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    steps.forEach((st, k) => {
      const f = floorSteps[k];
      process.stdout.write(
        `| ${st.asked} | ${st.held} | ${fmt(st.openSeconds, 1)} | ${st.delivered}/${st.expected}${st.missing ? ` (${st.missing} missing)` : ""} | ${fmt(st.p50)} | ${fmt(st.p99)} | ${fmt(st.max)} | ${f ? `${f.held} | ${fmt(f.p50)} | ${fmt(f.p99)}` : "| |"} |\n`,
      );
    });
    const duplicates = steps.reduce((n, st) => n + st.duplicates, 0);
    if (duplicates > 0) process.stdout.write(`DELIVERY CHECK FAILED: ${duplicates} duplicated deliveries\n`);
    if (duplicates > 0 || steps.some((st) => st.missing > 0 || st.held < st.asked)) failed = true;
    if (retried > 0) process.stdout.write(`${retried} calls answered 503 under load and were sent again\n`);
    bench("gateway.added_ms.p50", added, "ms");
    bench("gateway.unary.p50_ms", rows[0]![1].p50, "ms");
    bench("gateway.direct.p50_ms", rows[1]![1].p50, "ms");
    bench("gateway.http_echo.p50_ms", rows[2]![1].p50, "ms");
    for (const st of steps) {
      bench(`gateway.sse.held.s${st.asked}`, st.held, "streams");
      bench(`gateway.sse.p50_ms.s${st.asked}`, st.p50, "ms");
      bench(`gateway.sse.p99_ms.s${st.asked}`, st.p99, "ms");
    }
    for (const st of floorSteps) bench(`gateway.sse.floor_p99_ms.s${st.asked}`, st.p99, "ms");
    bench("gateway.sse.exactly_once", failed ? 0 : 1, "bool");
  } finally {
    echo.close();
    child.kill("SIGTERM");
    await once(child, "exit");
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
}

main().then(
  () => process.exit(failed ? 1 : 0),
  (error: unknown) => {
    process.stderr.write(`${(error as Error).stack}\n`);
    process.exit(1);
  },
);
