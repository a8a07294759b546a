import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import { toStatus } from "@unimatrix/service-kit/grpc";
import {
  applyMigrations,
  type Database,
  inTransaction,
  isUniqueViolation,
  openDatabase,
  rawQuery,
  readMigrations,
  type Tx,
} from "@unimatrix/service-kit/store";
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
    // rawQuery: a `$queryRaw` template straight on the store, values bound as $1…$n (a text, an array).
    const raw = rawQuery(database);
    expect(await raw.$queryRaw`SELECT name FROM widget WHERE id = ${2} AND name = ${"second!"}`).toEqual([
      { name: "second!" },
    ]);
    expect(await raw.$queryRaw`SELECT cardinality(${[1, 2, 3]}::int[]) AS n`).toEqual([{ n: 3 }]);
    // A failed transaction leaves nothing behind.
    await expect(
      prisma.$transaction(async (tx) => {
        await tx.widget.create({ data: { id: 3, name: "third" } });
        await tx.widget.create({ data: { id: 3, name: "duplicate" } });
      }),
    ).rejects.toThrow();
    expect(await prisma.widget.count()).toBe(2);
    await duplicates(prisma);
  } finally {
    await prisma.$disconnect();
  }
}

/** The error a promise rejects with. */
async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a failure");
}

/** A duplicate insert, however it is made, is a unique violation (and ALREADY_EXISTS, never INTERNAL). */
async function duplicates(prisma: PrismaClient) {
  const attempts = {
    model: () => prisma.widget.create({ data: { id: 1, name: "again" } }),
    raw: () => prisma.$executeRaw`INSERT INTO widget (id, name) VALUES (1, 'again')`,
    transaction: () =>
      inTransaction(prisma, async (tx: Tx<PrismaClient>) => {
        await tx.widget.create({ data: { id: 9, name: "ok" } });
        await tx.widget.create({ data: { id: 2, name: "again" } });
      }),
  };
  for (const [how, attempt] of Object.entries(attempts)) {
    const error = await failure(attempt());
    expect({ how, unique: isUniqueViolation(error), code: toStatus(error).code }).toEqual({
      how,
      unique: true,
      code: status.ALREADY_EXISTS,
    });
  }
  // The transaction rolled back; other failures are not unique violations.
  expect(await prisma.widget.count()).toBe(2);
  const other = await failure(prisma.$executeRaw`INSERT INTO widget (id) VALUES (5)`);
  expect(isUniqueViolation(other)).toBe(false);
}

describe("Prisma client factory", () => {
  it("runs a generated client on a Postgres schema through adapter-pg; a duplicate is a unique violation", async () => {
    const schema: TestSchema = testSchema("prisma");
    const database = await openDatabase({ service: "fixture", url: schema.url, schema: schema.schema });
    try {
      await exercise(database);
    } finally {
      await database.close();
      await schema.drop();
    }
  });

  it("runs the same client on an embedded PGlite store; a duplicate is a unique violation there too", async () => {
    const database = await openDatabase({ service: "fixture", dataDir: mkdtempSync(join(tmpdir(), "umx-prisma-")) });
    try {
      await exercise(database);
    } finally {
      await database.close();
    }
  });
});
