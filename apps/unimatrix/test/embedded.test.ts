import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { startCube } from "@unimatrix/cube";
import { startDevice } from "@unimatrix/device";
import type { Principal } from "@unimatrix/service-kit/auth";
import { InProcessBus } from "@unimatrix/service-kit/bus";
import { createClient } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import type { RunningService } from "@unimatrix/service-kit/service";
import { formerEmbeddedStores, openDatabase } from "@unimatrix/service-kit/store";
import { asBearer, asPrincipal, expectStatus, TEST_INTERNAL_KEY, testConfig } from "@unimatrix/service-kit/testing";

const OPERATOR = "umx_operator_embeddedtest_0123456789abcdef";

/** The SQLSTATE a rejected query carries (PGlite's error shape), or undefined when it succeeded. */
async function sqlState(query: Promise<unknown>): Promise<string | undefined> {
  try {
    await query;
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code;
  }
}

describe("embedded default: services in one process share one PGlite", () => {
  let dataDir: string;
  let bus: InProcessBus;
  let cube: RunningService;
  let device: RunningService;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "umx-shared-"));
    bus = new InProcessBus();
    const config = testConfig({ databaseUrl: undefined, redisUrl: undefined, dataDir, operatorToken: OPERATOR });
    cube = await startCube({ config, port: 0, bus, logger: silentLogger(), cube: { livenessIntervalMs: 0 } });
    device = await startDevice({ config, port: 0, bus, logger: silentLogger(), sweepMs: 0 });
  }, 120_000);

  afterAll(async () => {
    await device?.stop();
    await cube?.stop();
    await bus?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("keeps one store for the process, each service in its own schema", async () => {
    expect([cube.database.kind, cube.database.schema]).toEqual(["pglite", "cube"]);
    expect([device.database.kind, device.database.schema]).toEqual(["pglite", "device"]);
    // One directory for the process (and its pid file), none per service.
    expect(readdirSync(dataDir).sort()).toEqual(["pglite", "pglite.pid"]);
    const a = await cube.database.openSession();
    const b = await device.database.openSession();
    // One connection behind both: a session setting made through one is read through the other.
    await a.exec("SET unimatrix.probe = 'shared'");
    expect(await b.query("SELECT current_setting('unimatrix.probe', true) AS probe")).toEqual([{ probe: "shared" }]);
    const schemas = await a.query<{ nspname: string }>(
      "SELECT nspname FROM pg_namespace WHERE nspname IN ('cube', 'device', 'public') ORDER BY nspname",
    );
    expect(schemas.map((s) => s.nspname)).toEqual(["cube", "device", "public"]);
    // The migrations created every table in the service's schema, none in public.
    const tables = await a.query<{ table_schema: string; n: number }>(
      `SELECT table_schema, count(*)::int AS n FROM information_schema.tables
        WHERE table_schema IN ('cube', 'device', 'public') GROUP BY table_schema ORDER BY table_schema`,
    );
    expect(tables.map((t) => t.table_schema)).toEqual(["cube", "device"]);
    await a.close();
    await b.close();
  });

  it("lets each service see only its own schema's tables", async () => {
    const a = await cube.database.openSession();
    const b = await device.database.openSession();
    expect(await a.query("SHOW search_path")).toEqual([{ search_path: "cube" }]);
    expect(await b.query("SHOW search_path")).toEqual([{ search_path: "device" }]);
    // Interleaved, each statement resolves names in its own service's schema.
    for (let i = 0; i < 3; i++) {
      expect(await sqlState(a.query("SELECT count(*) FROM tenants"))).toBeUndefined();
      expect(await sqlState(b.query("SELECT count(*) FROM tenants"))).toBe("42P01");
      expect(await sqlState(b.query("SELECT count(*) FROM devices"))).toBeUndefined();
      expect(await sqlState(a.query("SELECT count(*) FROM devices"))).toBe("42P01");
    }
    await a.close();
    await b.close();
  });

  it("answers concurrent calls of both services from their own schemas, and ALREADY_EXISTS on a taken name", async () => {
    const identity = createClient(IdentityService, `127.0.0.1:${cube.port}`);
    const enrollment = createClient(EnrollmentService, `127.0.0.1:${device.port}`);
    const tenantId = randomUUID();
    const user: Principal = { kind: "user", tenantId, subjectId: randomUUID() };
    try {
      const names = Array.from({ length: 8 }, (_, i) => `shared-${i}`);
      const [tenants, tokens] = await Promise.all([
        Promise.all(
          names.map((name) => identity.createTenant({ name, adminDisplayName: "admin" }, asBearer(OPERATOR))),
        ),
        Promise.all(
          names.map(() => enrollment.issueEnrollToken({ ttlSeconds: 60 }, asPrincipal(user, TEST_INTERNAL_KEY))),
        ),
      ]);
      expect(new Set(tenants.map((t) => t.tenant?.name))).toEqual(new Set(names));
      expect(new Set(tokens.map((t) => t.token)).size).toBe(names.length);
      // Unique violations on the shared store are recognised: a taken name is ALREADY_EXISTS, not INTERNAL.
      await expectStatus(
        identity.createTenant({ name: "shared-0", adminDisplayName: "again" }, asBearer(OPERATOR)),
        status.ALREADY_EXISTS,
      );
      const issued = await identity.issueClient({ name: "agent" }, asBearer(tenants[0]!.adminUserToken));
      expect(issued.token).toMatch(/^umx_/);
      await expectStatus(
        identity.issueClient({ name: "agent" }, asBearer(tenants[0]!.adminUserToken)),
        status.ALREADY_EXISTS,
      );
      // The rows landed in the owning service's schema.
      const a = await cube.database.openSession();
      const rows = await a.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM cube.tenants WHERE name LIKE 'shared-%'",
      );
      expect(rows).toEqual([{ n: names.length }]);
      await a.close();
    } finally {
      identity.close();
      enrollment.close();
    }
  });

  it("finds the per-service stores an older version left, and only those", () => {
    const old = mkdtempSync(join(tmpdir(), "umx-old-"));
    try {
      for (const name of ["cube", "device"]) {
        mkdirSync(join(old, name, "pgdata"), { recursive: true });
        writeFileSync(join(old, name, "pgdata", "PG_VERSION"), "17\n");
      }
      mkdirSync(join(old, "pglite"));
      writeFileSync(join(old, "pglite", "PG_VERSION"), "17\n");
      expect(formerEmbeddedStores(old).sort()).toEqual([join(old, "cube"), join(old, "device")]);
      expect(formerEmbeddedStores(dataDir)).toEqual([]);
    } finally {
      rmSync(old, { recursive: true, force: true });
    }
  });

  it("refuses a second process's claim on the store with a message naming UMX_DATA_DIR", async () => {
    // This process holds it: another process id in the pid file stands for a second process.
    const other = join(tmpdir(), `umx-claimed-${randomUUID()}`);
    mkdirSync(other, { recursive: true });
    writeFileSync(join(other, "pglite.pid"), String(process.ppid));
    try {
      await expect(openDatabase({ service: "cube", dataDir: other })).rejects.toThrow(
        /UMX_DATA_DIR .* is in use by process \d+: the embedded store serves one process/,
      );
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});
