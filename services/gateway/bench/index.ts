// Gateway benchmark, every figure next to its baseline from the same run:
//  1. unary: Connect JSON through the gateway vs the same call straight to the cube service over
//     gRPC vs a bare HTTP echo server (the floor of an HTTP round trip from this client);
//  2. SSE fan-out: N open streams on one gateway, append→delivery latency at a fixed append rate.
// The system (four services on Postgres + Redis) runs in a child process, as `npm start` runs it,
// so the client's CPU is not the server's.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { createClient, PRINCIPAL_HEADER, signPrincipal } from "@unimatrix/service-kit";
import { TEST_DATABASE_URL, TEST_REDIS_URL, testBusPrefix, uniqueName } from "@unimatrix/service-kit/testing";
import pg from "pg";

const OPERATOR = "umx_operator_gatewaybench_0123456789abcdef";
const KEY = "gateway-bench-internal-key-0123456789abcdef";
const CALLS = Number(process.env.BENCH_CALLS ?? 3_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 2_000);
const RATE = Number(process.env.BENCH_RATE ?? 10);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

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

async function startSystem(database: string): Promise<{ child: ChildProcess; ports: Record<string, number> }> {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${database}`;
  const root = join(__dirname, "..", "..", "..");
  const child = spawn(process.execPath, [join(root, "packages", "launcher", "dist", "main.js")], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: url.toString(),
      REDIS_URL: TEST_REDIS_URL,
      UMX_BUS_PREFIX: testBusPrefix("bench-gw"),
      UMX_INTERNAL_KEY: KEY,
      UMX_OPERATOR_TOKEN: OPERATOR,
      CUBE_PORT: "0",
      DEVICE_PORT: "0",
      PRESENCE_PORT: "0",
      GATEWAY_PORT: "0",
      GATEWAY_RATE_LIMIT_PER_SECOND: "0",
      CUBE_LIVENESS_INTERVAL_MS: "0",
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let output = "";
  const ports: Record<string, number> = {};
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      for (const m of output.matchAll(/^ {2}(cube|device|presence|gateway)\s+\w+:\/\/127\.0\.0\.1:(\d+)$/gm))
        ports[m[1]!] = Number(m[2]);
      if (Object.keys(ports).length === 4) resolve();
    });
    child.once("exit", (code) => reject(new Error(`system exited with ${code}`)));
  });
  return { child, ports };
}

async function main() {
  const database = uniqueName("bench_gateway");
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  const { child, ports } = await startSystem(database);
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

    // 2. SSE fan-out: the cube allows 10 streams per credential, so one client per 10 streams.
    const clients: string[] = [];
    for (let i = 0; i < Math.ceil(STREAMS / 10); i++) {
      const issued = await call<{ client: { id: string }; token: string }>(
        "unimatrix.cube.v1.IdentityService/IssueClient",
        { name: `reader-${i}` },
        user,
      );
      await call(
        "unimatrix.cube.v1.IdentityService/SetCubeGrant",
        { clientId: issued.client.id, cubeId: cube.id, access: "CUBE_ACCESS_READ" },
        user,
      );
      clients.push(issued.token);
    }
    const sent = new Map<string, number>();
    const latencies: number[] = [];
    let ready = 0;
    const controllers: AbortController[] = [];
    const open = async (token: string) => {
      const controller = new AbortController();
      controllers.push(controller);
      const response = await fetch(`${gateway}/v1/cubes/${cube.id}/events`, {
        headers: { authorization: `Bearer ${token}` },
        signal: controller.signal,
      });
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let end = buffer.indexOf("\n\n");
        while (end >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (frame.includes("event: ready")) ready++;
          const message = /"message":"(bench-\d+)"/.exec(frame)?.[1];
          const at = message ? sent.get(message) : undefined;
          if (at !== undefined) latencies.push(nowMs() - at);
          end = buffer.indexOf("\n\n");
        }
      }
    };
    const opening = Array.from({ length: STREAMS }, (_, i) => open(clients[Math.floor(i / 10)]!).catch(() => {}));
    const openStarted = nowMs();
    while (ready < STREAMS && nowMs() - openStarted < 60_000) await new Promise((r) => setTimeout(r, 50));
    const openSeconds = (nowMs() - openStarted) / 1000;
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
    const total = RATE * SECONDS;
    for (let i = 0; i < total; i++) {
      const message = `bench-${i}`;
      sent.set(message, nowMs());
      await call(
        "unimatrix.cube.v1.ActivityService/AppendEntry",
        { cubeId: cube.id, message, visibility: "VISIBILITY_BROADCAST" },
        sessionToken,
      );
      await new Promise((r) => setTimeout(r, 1000 / RATE));
    }
    const expected = total * ready;
    const waitUntil = nowMs() + 30_000;
    while (latencies.length < expected && nowMs() < waitUntil) await new Promise((r) => setTimeout(r, 50));
    for (const c of controllers) c.abort();
    await Promise.all(opening);
    latencies.sort((a, b) => a - b);
    process.stdout.write(
      `\nSSE fan-out: ${ready}/${STREAMS} streams ready in ${fmt(openSeconds, 1)} s; ${total} appends at ${RATE}/s\n` +
        `| deliveries | expected | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n` +
        `| ${latencies.length} | ${expected} | ${fmt(pct(latencies, 50))} | ${fmt(pct(latencies, 99))} | ${fmt(latencies.at(-1) ?? NaN)} |\n`,
    );
  } finally {
    echo.close();
    child.kill("SIGTERM");
    await once(child, "exit");
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack}\n`);
  process.exit(1);
});
