import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyMigrations, type Database, openDatabase, readMigrations } from "@unimatrix/service-kit";
import { type TestSchema, testSchema } from "@unimatrix/service-kit/testing";
import { PrismaClient } from "./fixtures/generated/prisma/client";

const migrations = readMigrations(join(__dirname, "fixtures", "migrations"));

/** Exercises a generated client on an opened store: CRUD, raw SQL, a locking transaction. */
async function exercise(database: Database) {
  const session = await database.openSession();
  await applyMigrations(session, database.schema, migrations);
  await session.close();
  const prisma = new PrismaClient({ adapter: database.adapter });
  try {
    await prisma.widget.create({ data: { id: 2, name: "second", colour: "blue" } });
    expect(await prisma.widget.findMany({ orderBy: { id: "asc" } })).toEqual([
      { id: 1, name: "first", colour: null },
      { id: 2, name: "second", colour: "blue" },
    ]);
    // Raw SQL sees the same tables (search_path), inside an interactive transaction with a row lock.
    const renamed = await prisma.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<{ name: string }[]>`SELECT name FROM widget WHERE id = 2 FOR UPDATE`;
      await tx.widget.update({ where: { id: 2 }, data: { name: `${rows[0]!.name}!` } });
      return tx.widget.findUniqueOrThrow({ where: { id: 2 } });
    });
    expect(renamed.name).toBe("second!");
    // A failed transaction leaves nothing behind.
    await expect(
      prisma.$transaction(async (tx) => {
        await tx.widget.create({ data: { id: 3, name: "third" } });
        await tx.widget.create({ data: { id: 3, name: "duplicate" } });
      }),
    ).rejects.toThrow();
    expect(await prisma.widget.count()).toBe(2);
  } finally {
    await prisma.$disconnect();
  }
}

describe("Prisma client factory", () => {
  it("runs a generated client on a Postgres schema through adapter-pg", async () => {
    const schema: TestSchema = testSchema("prisma");
    const database = await openDatabase({ service: "fixture", url: schema.url, schema: schema.schema });
    try {
      await exercise(database);
    } finally {
      await database.close();
      await schema.drop();
    }
  });

  it("runs the same client on an embedded PGlite store", async () => {
    const database = await openDatabase({ service: "fixture", dataDir: mkdtempSync(join(tmpdir(), "umx-prisma-")) });
    try {
      await exercise(database);
    } finally {
      await database.close();
    }
  });
});
