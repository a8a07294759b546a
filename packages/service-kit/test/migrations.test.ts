import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { applyMigrations, type Database, openDatabase, readMigrations } from "@unimatrix/service-kit";
import { type TestSchema, testSchema } from "@unimatrix/service-kit/testing";

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

  it("runs from several processes at once: one applies, the others find nothing to do", async () => {
    const children = await Promise.all(
      [1, 2, 3].map(() => run(tsx, [join(__dirname, "fixtures", "migrate-child.ts"), schema.url, schema.schema])),
    );
    const results = children.map((child) => JSON.parse(child.stdout.trim()) as { applied: string[] });
    expect(results.map((r) => r.applied.length).sort()).toEqual([0, 0, 2]);
    expect(await query("SELECT count(*)::int AS n FROM widget")).toEqual([{ n: 1 }]);
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
