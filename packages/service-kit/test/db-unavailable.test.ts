import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import { toStatus } from "@unimatrix/service-kit/grpc";
import {
  applyMigrations,
  type Database,
  inTransaction,
  isDatabaseUnavailable,
  openDatabase,
  readMigrations,
  type Tx,
} from "@unimatrix/service-kit/store";
import { TEST_DATABASE_URL, type TestSchema, testSchema } from "@unimatrix/service-kit/testing";
import pg from "pg";
import { PrismaClient } from "./fixtures/generated/prisma/client";

/**
 * The store's connectivity failures, provoked for real on the shared Postgres without disturbing
 * anyone else: only this suite's own backends (its `application_name` is its schema) are
 * terminated, read-only is a setting of its own session, and "unreachable" is a port nobody
 * listens on. Each must answer UNAVAILABLE (never INTERNAL), roll back what it had begun, and the
 * pool must recover by itself. Restarting a whole server is the fleet suite's (`db-faults`).
 */

const migrations = readMigrations(join(__dirname, "fixtures", "migrations"));

/** The error a promise rejects with. */
async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a failure");
}

/** What a caller would see for an error. */
const answer = (error: unknown) => ({ unavailable: isDatabaseUnavailable(error), code: status[toStatus(error).code] });
const UNAVAILABLE = { unavailable: true, code: "UNAVAILABLE" };

describe("database connectivity failures answer UNAVAILABLE", () => {
  let schema: TestSchema;
  let database: Database;
  let prisma: PrismaClient;
  let admin: pg.Client;

  /** Terminates this suite's backends (all, or the one with `pid`); answers how many. */
  const terminate = async (pid?: number): Promise<number> => {
    const { rows } = await admin.query<{ n: string }>(
      `SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
        WHERE application_name = $1 AND pid <> pg_backend_pid() AND ($2::int IS NULL OR pid = $2::int)`,
      [schema.schema, pid ?? null],
    );
    return Number(rows[0]!.n);
  };

  beforeAll(async () => {
    schema = testSchema("dbunavail");
    database = await openDatabase({ service: "fixture", url: schema.url, schema: schema.schema, poolSize: 4 });
    const session = await database.openSession();
    await applyMigrations(session, database.schema, migrations);
    await session.close();
    prisma = new PrismaClient({ adapter: database.adapter });
    admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
  });

  afterAll(async () => {
    await prisma?.$disconnect();
    await database?.close();
    await admin?.end();
    await schema?.drop();
  });

  it("idle pooled connections terminated: no crash, the pool reconnects, and the probe passes on a new connection", async () => {
    await Promise.all([1, 2, 3].map(() => database.query("SELECT pg_sleep(0.05)", [])));
    await database.probe(1_000);
    expect(await terminate()).toBeGreaterThanOrEqual(2); // the pool's idle ones and the probe's
    await new Promise((resolve) => setTimeout(resolve, 100)); // their 'error' events arrive
    expect(await prisma.widget.count()).toBe(1);
    expect(await database.query("SELECT 1 AS one", [])).toEqual([{ one: 1 }]);
    await database.probe(1_000);
  });

  it("a statement in flight when its backend is terminated (57P01): raw and through Prisma", async () => {
    const raw = failure(database.query("SELECT pg_sleep(5)", []));
    const viaPrisma = failure(prisma.$queryRaw`SELECT pg_sleep(5)`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await terminate();
    expect(answer(await raw)).toEqual(UNAVAILABLE);
    expect(answer(await viaPrisma)).toEqual(UNAVAILABLE);
    expect(await prisma.widget.count()).toBe(1);
  });

  it("a transaction whose connection dies (busy, or idle in it) rolls back and answers UNAVAILABLE", async () => {
    for (const [id, busy] of [
      [10, true],
      [11, false],
    ] as const) {
      const killed = failure(
        inTransaction(prisma, async (tx: Tx<PrismaClient>) => {
          await tx.widget.create({ data: { id, name: "half" } });
          const [{ pid }] = await tx.$queryRaw<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
          const terminated = terminate(pid);
          if (busy) await tx.$queryRaw`SELECT pg_sleep(5)`;
          else await terminated.then(() => new Promise((resolve) => setTimeout(resolve, 100)));
          await tx.widget.create({ data: { id: id + 100, name: "never" } });
        }),
      );
      expect({ busy, ...answer(await killed) }).toEqual({ busy, ...UNAVAILABLE });
      expect(await prisma.widget.findMany({ where: { id: { in: [id, id + 100] } } })).toEqual([]);
    }
  });

  it("a read-only database (25006) refuses writes with UNAVAILABLE: model, raw and in a transaction", async () => {
    const single = await openDatabase({ service: "fixture", url: schema.url, schema: schema.schema, poolSize: 1 });
    const client = new PrismaClient({ adapter: single.adapter });
    try {
      // One pooled connection, made read-only as a standby or a failover's first moment is (again
      // before each attempt: the pool drops a connection whose query failed).
      const readOnly = () => single.query("SET default_transaction_read_only = on", []);
      await readOnly();
      expect(answer(await failure(client.widget.create({ data: { id: 20, name: "ro" } })))).toEqual(UNAVAILABLE);
      await readOnly();
      expect(answer(await failure(single.query("INSERT INTO widget (id, name) VALUES (21, 'ro')", [])))).toEqual(
        UNAVAILABLE,
      );
      await readOnly();
      expect(
        answer(await failure(inTransaction(client, (tx) => tx.widget.create({ data: { id: 22, name: "ro" } })))),
      ).toEqual(UNAVAILABLE);
      await single.query("SET default_transaction_read_only = off", []);
      await client.widget.create({ data: { id: 23, name: "rw" } });
    } finally {
      await client.$disconnect();
      await single.close();
    }
    expect((await prisma.widget.findMany({ orderBy: { id: "asc" } })).map((w) => w.id)).toEqual([1, 23]);
  });

  it("an unreachable server (ECONNREFUSED, P1001): model, raw, transaction and the probe", async () => {
    const url = new URL(TEST_DATABASE_URL);
    url.port = "1";
    const nowhere = await openDatabase({ service: "fixture", url: url.toString(), schema: schema.schema });
    const client = new PrismaClient({ adapter: nowhere.adapter });
    try {
      expect(answer(await failure(client.widget.findMany()))).toEqual(UNAVAILABLE);
      expect(answer(await failure(nowhere.query("SELECT 1", [])))).toEqual(UNAVAILABLE);
      expect(answer(await failure(inTransaction(client, (tx) => tx.widget.count())))).toEqual(UNAVAILABLE);
      await expect(nowhere.probe(500)).rejects.toThrow(/ECONNREFUSED/);
    } finally {
      await client.$disconnect();
      await nowhere.close();
    }
  });

  it("other store errors are not connectivity failures", () => {
    expect(isDatabaseUnavailable(Object.assign(new Error("dup"), { code: "23505" }))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error("syntax"), { code: "42601" }))).toBe(false);
    expect(isDatabaseUnavailable(new Error("boom"))).toBe(false);
    expect(toStatus(new Error("Connection terminated unexpectedly")).code).toBe(status.UNAVAILABLE);
    expect(toStatus(Object.assign(new Error("x"), { code: "08006" })).code).toBe(status.UNAVAILABLE);
    expect(toStatus(Object.assign(new Error("x"), { code: "57P03" })).code).toBe(status.UNAVAILABLE);
  });
});
