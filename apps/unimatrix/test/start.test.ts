import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import {
  spawnSystem,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  testBusPrefix,
  uniqueName,
} from "@unimatrix/service-kit/testing";
import pg from "pg";
import { SERVICE_NAMES } from "../src/services";

const root = join(__dirname, "..", "..", "..");
const main = join(root, "apps", "unimatrix", "dist", "main.js");

/** Starts `npm start`'s entry point and resolves with the ports it printed. */
function startUnimatrix(env: NodeJS.ProcessEnv) {
  return spawnSystem({ entry: main, cwd: root, services: SERVICE_NAMES, env });
}

async function expectUp(ports: Record<string, number>) {
  for (const name of ["cube", "device", "presence"]) {
    const client = createClient(Health, `127.0.0.1:${ports[name]}`);
    try {
      expect((await client.check({ service: "" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    } finally {
      client.close();
    }
  }
  const healthz = await fetch(`http://127.0.0.1:${ports.gateway}/healthz`);
  expect(healthz.status).toBe(200);
  const readyz = await fetch(`http://127.0.0.1:${ports.gateway}/readyz`);
  expect(readyz.status).toBe(200);
  expect(await readyz.json()).toMatchObject({ status: "ready" });
}

async function stop(child: ChildProcessWithoutNullStreams): Promise<number | null> {
  const exited = once(child, "exit") as Promise<[number | null]>;
  child.kill("SIGINT");
  const [code] = await exited;
  return code;
}

describe("npm start", () => {
  it("runs all four services on the embedded default (PGlite, in-process bus) and stops cleanly on Ctrl-C", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "umx-start-"));
    const { child, ports, output } = await startUnimatrix({ UMX_DATA_DIR: dataDir, DATABASE_URL: "", REDIS_URL: "" });
    try {
      expect(output()).toContain("embedded PGlite");
      // The banner says how long the start took.
      expect(output()).toMatch(/^unimatrix is up in \d+\.\d s \(/m);
      await expectUp(ports);
    } finally {
      expect(await stop(child)).toBe(0);
    }
    // The stores persist: a second start finds them migrated and comes up again.
    const again = await startUnimatrix({ UMX_DATA_DIR: dataDir, DATABASE_URL: "", REDIS_URL: "" });
    try {
      await expectUp(again.ports);
    } finally {
      expect(await stop(again.child)).toBe(0);
    }
    // PGlite creates each store on first start (initdb in WebAssembly): slow on a loaded 2-core machine.
  }, 240_000);

  it("runs the same command against Postgres and Redis when their URLs are set", async () => {
    const database = uniqueName("umx_start");
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    const url = new URL(TEST_DATABASE_URL);
    url.pathname = `/${database}`;
    try {
      const { child, ports, output } = await startUnimatrix({
        DATABASE_URL: url.toString(),
        REDIS_URL: TEST_REDIS_URL,
        UMX_BUS_PREFIX: testBusPrefix("start"),
        UMX_INTERNAL_KEY: "start-test-internal-key-0123456789abcdef",
      });
      try {
        expect(output()).toContain("Postgres at DATABASE_URL");
        await expectUp(ports);
      } finally {
        expect(await stop(child)).toBe(0);
      }
      const schemas = await new pg.Client({ connectionString: url.toString() });
      await schemas.connect();
      const rows = await schemas.query(
        "SELECT nspname FROM pg_namespace WHERE nspname IN ('cube', 'device', 'presence') ORDER BY nspname",
      );
      await schemas.end();
      expect(rows.rows.map((r) => r.nspname)).toEqual(["cube", "device", "presence"]);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
    }
  });

  it("refuses a bad variable with a message naming it", async () => {
    const child = spawn(process.execPath, [main], { cwd: root, env: { ...process.env, CUBE_PORT: "seventy" } });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const [code] = (await once(child, "exit")) as [number];
    expect(code).toBe(78);
    expect(stderr).toMatch(/^invalid configuration: CUBE_PORT /);
  });
});
