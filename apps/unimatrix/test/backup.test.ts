import { type ChildProcessWithoutNullStreams, execFileSync } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  readSseFrames,
  seedTenant,
  spawnSystem,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  testBusPrefix,
  uniqueName,
} from "@unimatrix/service-kit/testing";
import pg from "pg";
import { SERVICE_NAMES } from "../src/services";

// The operator's backup and restore (README "Backups"): each service's schema dumped with
// `pg_dump -Fc -n <schema>` from a running system, restored with `pg_restore` into a fresh
// database; the system started on the copy knows the same tokens and resumes streams from
// cursors taken before the backup. Redis holds nothing to back up.

const root = join(__dirname, "..", "..", "..");
const main = join(root, "apps", "unimatrix", "dist", "main.js");
const OPERATOR = "umx_operator_backuptest_0123456789abcdef";
const KEY = "backup-test-internal-key-0123456789abcdef";
const SCHEMAS = ["cube", "device", "presence"];

function databaseUrl(name: string): string {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

function start(database: string) {
  return spawnSystem({
    entry: main,
    cwd: root,
    services: SERVICE_NAMES,
    env: {
      DATABASE_URL: databaseUrl(database),
      REDIS_URL: TEST_REDIS_URL,
      UMX_BUS_PREFIX: testBusPrefix(database),
      UMX_INTERNAL_KEY: KEY,
      UMX_OPERATOR_TOKEN: OPERATOR,
    },
  });
}

async function stop(child: ChildProcessWithoutNullStreams): Promise<void> {
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  await exited;
}

/** A Connect JSON call through the gateway. */
async function call<T>(gateway: string, path: string, body: unknown, token: string): Promise<T> {
  const response = await fetch(`${gateway}/unimatrix.cube.v1.${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as T;
  if (!response.ok) throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

interface Entry {
  id: string;
  cursor: string;
  message: string;
}

describe("backup and restore", () => {
  const original = uniqueName("umx_backup");
  const restored = uniqueName("umx_restored");
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });

  beforeAll(async () => {
    await admin.connect();
    await admin.query(`CREATE DATABASE ${original}`);
    await admin.query(`CREATE DATABASE ${restored}`);
  });
  afterAll(async () => {
    for (const name of [original, restored]) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });

  it("restores per-schema dumps: the same tokens work and a stream resumes from a cursor taken before the backup", async () => {
    // Before: a tenant, a client with a seat, three entries; the cursor after the second.
    const before = await start(original);
    let seeded: Awaited<ReturnType<typeof seedTenant>>;
    let drone: string;
    let posted: Entry[];
    try {
      const gateway = `http://127.0.0.1:${before.ports.gateway}`;
      seeded = await seedTenant(
        { connect: gateway },
        { operatorToken: OPERATOR, tenant: "backup", cube: { name: "kept" }, clients: ["agent"] },
      );
      const client = seeded.clients[0]!.token;
      const seat = await call<{ sessionToken: string }>(
        gateway,
        "CubeService/AttachSeat",
        { cubeId: seeded.cubeId, hostname: "host" },
        client,
      );
      drone = seat.sessionToken;
      posted = [];
      for (const message of ["one", "two", "three"]) {
        const { entry } = await call<{ entry: Entry }>(
          gateway,
          "ActivityService/AppendEntry",
          { cubeId: seeded.cubeId, message, visibility: "VISIBILITY_BROADCAST" },
          drone,
        );
        posted.push(entry);
      }
    } finally {
      await stop(before.child);
    }

    // The operator's commands: one custom-format dump per schema, restored into an empty database.
    const dir = mkdtempSync(join(tmpdir(), "umx-backup-"));
    for (const schema of SCHEMAS) {
      const file = join(dir, `${schema}.dump`);
      execFileSync("pg_dump", ["-Fc", "-n", schema, "-f", file, databaseUrl(original)]);
      execFileSync("pg_restore", ["--no-owner", "-d", databaseUrl(restored), file]);
    }

    const after = await start(restored);
    try {
      const gateway = `http://127.0.0.1:${after.ports.gateway}`;
      const cubeId = seeded.cubeId!;
      // The client's and the drone's tokens are still theirs.
      const { cubes } = await call<{ cubes: { id: string }[] }>(
        gateway,
        "CubeService/ListCubes",
        {},
        seeded.clients[0]!.token,
      );
      expect(cubes.map((c) => c.id)).toEqual([cubeId]);
      const page = await call<{ items: { entry?: Entry }[] }>(
        gateway,
        "ActivityService/ReadActivity",
        { cubeId, cursor: posted[1]!.cursor },
        drone,
      );
      expect(page.items.map((i) => i.entry?.message)).toEqual(["three"]);

      // An SSE stream resumed from the pre-backup cursor gets what followed it, then what is new.
      const seen: string[] = [];
      const controller = new AbortController();
      const reading = readSseFrames(
        `${gateway}/v1/cubes/${cubeId}/events?after=${encodeURIComponent(posted[1]!.cursor)}`,
        drone,
        controller.signal,
        (frame) => {
          const data = /^data: (.*)$/m.exec(frame)?.[1];
          if (/^event: entry$/m.test(frame) && data) seen.push((JSON.parse(data) as Entry).message);
          if (seen.includes("four")) controller.abort();
        },
      );
      const { entry: fourth } = await call<{ entry: Entry & { position: string } }>(
        gateway,
        "ActivityService/AppendEntry",
        { cubeId, message: "four", visibility: "VISIBILITY_BROADCAST" },
        drone,
      );
      await reading;
      expect(seen).toEqual(["three", "four"]);
      expect(fourth.position).toBe("4");
    } finally {
      await stop(after.child);
    }
  }, 240_000);
});
