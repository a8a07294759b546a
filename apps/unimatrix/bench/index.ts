// Embedded-default benchmark: what a newcomer's `npm start` costs. Runs the start command with no
// DATABASE_URL/REDIS_URL on a fresh data directory in a child process, and prints
//   BENCH embedded.ready_s.first   spawn → /readyz 200 on a fresh data directory (initdb, migrations)
//   BENCH embedded.ready_s.warm    the same on the data directory the first start left
//   BENCH embedded.rss_mb.idle     resident memory of the process, settled after start
//   BENCH embedded.rss_mb.load     resident memory after 1,000 appends with 100 SSE streams open
//   BENCH mcp.*.embedded           the MCP agent path on it (services/gateway/bench/mcp-path.ts)
// RSS is read from /proc/<pid>/status (VmRSS), so it counts everything: V8 heaps and WebAssembly.
import { type ChildProcess, execFileSync } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readSseFrames, spawnSystem } from "@unimatrix/service-kit/testing";
import { mcpPath } from "../../../services/gateway/bench/mcp-path";
import { SERVICE_NAMES } from "../src/services";

const root = join(__dirname, "..", "..", "..");
const APPENDS = Number(process.env.BENCH_APPENDS ?? 1_000);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 100);
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 5_000);
/** What `npm start` runs after its build check (which is timed too); BENCH_START overrides, e.g. for an older tree. */
const START = (process.env.BENCH_START ?? "apps/unimatrix/dist/main.js").split(" ");

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const bench = (name: string, value: number, unit: string) =>
  process.stdout.write(`BENCH embedded.${name} ${value.toFixed(unit === "s" ? 2 : 0)}\n`);

/** Resident set size of a process in MB (VmRSS). */
function rssMb(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) / 1024 : Number.NaN;
}

interface Started {
  readonly child: ChildProcess;
  readonly gateway: string;
  readonly metrics: string;
  readonly readySeconds: number;
}

/** Spawns the start command on `dataDir` and waits until the gateway's /readyz answers 200. */
async function start(dataDir: string): Promise<Started> {
  const began = nowMs();
  if (!process.env.BENCH_START)
    execFileSync(process.execPath, [join(root, "scripts", "ensure-built.mjs")], { cwd: root });
  const [script, ...args] = START;
  const { child, ports, metricsPorts } = await spawnSystem({
    entry: join(root, script!),
    args,
    cwd: root,
    services: SERVICE_NAMES,
    env: {
      DATABASE_URL: "",
      REDIS_URL: "",
      UMX_DATA_DIR: dataDir,
      GATEWAY_RATE_LIMIT_PER_SECOND: "0",
      CUBE_LIVENESS_INTERVAL_MS: "0",
    },
    echo: true,
  });
  const gateway = `http://127.0.0.1:${ports.gateway}`;
  for (;;) {
    const ok = await fetch(`${gateway}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    await sleep(20);
  }
  const metrics = `http://127.0.0.1:${metricsPorts.gateway}/metrics`;
  return { child, gateway, metrics, readySeconds: (nowMs() - began) / 1000 };
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  await exited;
}

/** Creates a tenant and cube, opens STREAMS SSE streams, appends APPENDS entries, waits for delivery. */
async function load(
  gateway: string,
  operator: string,
): Promise<{ delivered: number; expected: number; close(): Promise<void> }> {
  const call = async <T>(path: string, body: unknown, token: string): Promise<T> => {
    const response = await fetch(`${gateway}/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  };
  const { adminUserToken: user } = await call<{ adminUserToken: string }>(
    "unimatrix.cube.v1.IdentityService/CreateTenant",
    { name: "bench", adminDisplayName: "bench" },
    operator,
  );
  const { cube } = await call<{ cube: { id: string } }>(
    "unimatrix.cube.v1.CubeService/CreateCube",
    { requestKey: crypto.randomUUID(), name: "bench", directive: "measure" },
    user,
  );
  // The cube allows 10 streams per credential: one reader client per 10 streams.
  const readers: string[] = [];
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
    readers.push(issued.token);
  }
  let ready = 0;
  let delivered = 0;
  const controllers: AbortController[] = [];
  const open = async (token: string) => {
    const controller = new AbortController();
    controllers.push(controller);
    await readSseFrames(`${gateway}/v1/cubes/${cube.id}/events`, token, controller.signal, (frame) => {
      if (frame.includes("event: ready")) ready++;
      if (frame.includes('"message":"bench-')) delivered++;
    });
  };
  const streams = Array.from({ length: STREAMS }, (_, i) => open(readers[Math.floor(i / 10)]!).catch(() => {}));
  const deadline = nowMs() + 60_000;
  while (ready < STREAMS && nowMs() < deadline) await sleep(50);
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
  // Four writers in flight: a steady load, not one call at a time.
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < APPENDS) {
        const i = next++;
        await call(
          "unimatrix.cube.v1.ActivityService/AppendEntry",
          { cubeId: cube.id, message: `bench-${i}`, visibility: "VISIBILITY_BROADCAST" },
          sessionToken,
        );
      }
    }),
  );
  const expected = APPENDS * ready;
  const until = nowMs() + 60_000;
  while (delivered < expected && nowMs() < until) await sleep(50);
  const close = async () => {
    for (const c of controllers) c.abort();
    await Promise.all(streams);
  };
  return { delivered, expected, close };
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), "umx-bench-embedded-"));
  try {
    const first = await start(dataDir);
    await stop(first.child);
    const warm = await start(dataDir);
    bench("ready_s.first", first.readySeconds, "s");
    bench("ready_s.warm", warm.readySeconds, "s");
    try {
      await sleep(SETTLE_MS);
      bench("rss_mb.idle", rssMb(warm.child.pid!), "mb");
      const operator = readFileSync(join(dataDir, "operator-token"), "utf8").trim();
      const { delivered, expected, close } = await load(warm.gateway, operator);
      const rss = rssMb(warm.child.pid!);
      process.stdout.write(`(load: ${APPENDS} appends, ${STREAMS} SSE streams, ${delivered}/${expected} delivered)\n`);
      bench("rss_mb.load", rss, "mb");
      await close();
      await mcpPath(warm.gateway, operator, warm.metrics, ".embedded");
    } finally {
      await stop(warm.child);
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack}\n`);
  process.exit(1);
});
