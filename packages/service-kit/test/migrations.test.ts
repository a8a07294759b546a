import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  applyMigrations,
  type Database,
  openDatabase,
  readMigrations,
  type SqlSession,
} from "@unimatrix/service-kit/store";
import { type TestSchema, testSchema } from "@unimatrix/service-kit/testing";
import pg from "pg";

const run = promisify(execFile);
const fixtures = join(__dirname, "fixtures", "migrations");
const tsx = join(__dirname, "..", "..", "..", "node_modules", ".bin", "tsx");

describe("migrations on Postgres", () => {
  let schema: TestSchema;
  let database: Database;

  beforeEach(async () => {
    schema = testSchema("migrations");
    database = await openDatabase({ service: "fixture", url: schema.url, schema: schema.schema });
  });
  afterEach(async () => {
    await database.close();
    await schema.drop();
  });

  const migrate = async (dir = fixtures) => {
    const session = await database.openSession();
    try {
      return await applyMigrations(session, schema.schema, readMigrations(dir));
    } finally {
      await session.close();
    }
  };
  const query = async <Row>(sql: string) => {
    const session = await database.openSession();
    try {
      return await session.query<Row>(sql);
    } finally {
      await session.close();
    }
  };

  it("applies in order once, and a second run changes nothing", async () => {
    const first = await migrate();
    expect(first.applied).toEqual(["20260101000000_init", "20260102000000_seed"]);
    const second = await migrate();
    expect(second.applied).toEqual([]);
    expect(second.alreadyApplied).toEqual(["20260101000000_init", "20260102000000_seed"]);
    expect(await query("SELECT id, name, colour FROM widget")).toEqual([{ id: 1, name: "first", colour: null }]);
    expect(await query("SELECT name FROM _unimatrix_migrations ORDER BY name")).toEqual([
      { name: "20260101000000_init" },
      { name: "20260102000000_seed" },
    ]);
  });

  it("runs from several processes at once: each migration is applied by exactly one", async () => {
    const children = await Promise.all(
      [1, 2, 3].map(() => run(tsx, [join(__dirname, "fixtures", "migrate-child.ts"), schema.url, schema.schema])),
    );
    const results = children.map((child) => JSON.parse(child.stdout.trim()) as { applied: string[] });
    // Each migration is applied by exactly one of them (which one may differ per migration).
    expect(results.flatMap((r) => r.applied).sort()).toEqual(["20260101000000_init", "20260102000000_seed"]);
    expect(await query("SELECT count(*)::int AS n FROM widget")).toEqual([{ n: 1 }]);
  });

  it("keeps no session state, so transaction pooling (PgBouncer) can move it between connections", async () => {
    // Three migrators whose every transaction may run on another server connection, as behind
    // PgBouncer in transaction mode: each switches connection after every transaction.
    const clients: pg.Client[] = [];
    const pooled = async (): Promise<SqlSession> => {
      const pair = [new pg.Client(schema.url), new pg.Client(schema.url)];
      await Promise.all(pair.map((client) => client.connect()));
      clients.push(...pair);
      let turn = 0;
      let inTransaction = false;
      const current = () => pair[turn % 2]!;
      const after = (text: string) => {
        if (/^\s*BEGIN/i.test(text)) inTransaction = true;
        if (/^\s*(COMMIT|ROLLBACK)/i.test(text)) inTransaction = false;
        if (!inTransaction) turn += 1;
      };
      const session: SqlSession = {
        async query<Row>(text: string, params: readonly unknown[] = []) {
          const rows = (await current().query(text, params as unknown[])).rows as Row[];
          after(text);
          return rows;
        },
        async exec(script: string) {
          await current().query(script);
          after(script);
        },
        async transaction<T>(fn: (tx: SqlSession) => Promise<T>) {
          await session.exec("BEGIN");
          try {
            const result = await fn(session);
            await session.exec("COMMIT");
            return result;
          } catch (error) {
            await session.exec("ROLLBACK");
            throw error;
          }
        },
        async close() {},
      };
      return session;
    };
    try {
      const sessions = await Promise.all([1, 2, 3].map(() => pooled()));
      const results = await Promise.all(
        sessions.map((session) => applyMigrations(session, schema.schema, readMigrations(fixtures))),
      );
      expect(results.flatMap((r) => r.applied).sort()).toEqual(["20260101000000_init", "20260102000000_seed"]);
      expect(await query("SELECT count(*)::int AS n FROM widget")).toEqual([{ n: 1 }]);
      // Nothing left behind on any connection: no advisory lock, the connection's own search_path.
      for (const client of clients) {
        const locks = await client.query(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
        );
        expect(locks.rows).toEqual([{ n: 0 }]);
        expect((await client.query("SHOW search_path")).rows).toEqual([{ search_path: '"$user", public' }]);
      }
    } finally {
      await Promise.all(clients.map((client) => client.end()));
    }
  });

  it("refuses a migration whose file changed after it was applied", async () => {
    const dir = mkdtempSync(join(tmpdir(), "umx-mig-"));
    cpSync(fixtures, dir, { recursive: true });
    await migrate(dir);
    writeFileSync(join(dir, "20260101000000_init", "migration.sql"), "SELECT 1;");
    await expect(migrate(dir)).rejects.toThrow(/20260101000000_init was changed after it was applied/);
  });

  it("rolls a failing migration back whole and records nothing for it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "umx-mig-"));
    cpSync(fixtures, dir, { recursive: true });
    cpSync(join(fixtures, "20260101000000_init"), join(dir, "20260103000000_broken"), { recursive: true });
    writeFileSync(join(dir, "20260103000000_broken", "migration.sql"), "CREATE TABLE half (id int); SELECT nope;");
    await expect(migrate(dir)).rejects.toThrow(/20260103000000_broken failed/);
    expect(await query("SELECT to_regclass('half') AS t")).toEqual([{ t: null }]);
    expect(await query("SELECT count(*)::int AS n FROM _unimatrix_migrations")).toEqual([{ n: 2 }]);
  });
});

describe("migrations on PGlite", () => {
  it("applies the same files to an embedded store, once", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "umx-pglite-"));
    const database = await openDatabase({ service: "fixture", dataDir });
    try {
      const session = await database.openSession();
      expect((await applyMigrations(session, database.schema, readMigrations(fixtures))).applied).toHaveLength(2);
      expect((await applyMigrations(session, database.schema, readMigrations(fixtures))).applied).toHaveLength(0);
      expect(await session.query("SELECT id, name FROM widget")).toEqual([{ id: 1, name: "first" }]);
    } finally {
      await database.close();
    }
  });
});
