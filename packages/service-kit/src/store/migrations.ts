import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Database } from "./database";
import type { SqlSession } from "./sql";

/** One SQL migration in Prisma's layout: `<dir>/<name>/migration.sql`. */
export interface Migration {
  readonly name: string;
  readonly sql: string;
  /** SHA-256 of the SQL; an applied migration whose file later changes is refused. */
  readonly checksum: string;
}

/** What a migration run did. */
export interface MigrationResult {
  readonly applied: readonly string[];
  readonly alreadyApplied: readonly string[];
  /** Recorded migrations this build does not know (a newer build ran them). */
  readonly newer: readonly string[];
}

/** The table (in the service's schema) that records applied migrations. */
export const MIGRATIONS_TABLE = "_unimatrix_migrations";

/** Reads a service's migrations, ordered by directory name (Prisma names start with a timestamp). */
export function readMigrations(dir: string): Migration[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(dir, entry.name, "migration.sql")))
    .map((entry) => entry.name)
    .sort()
    .map((name) => {
      const sql = readFileSync(join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    });
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * Applies the migrations not yet recorded, in order, each in its own transaction with its record.
 * Holds a session advisory lock keyed by the schema for the whole run, so any number of replicas
 * may start at once: one applies, the others wait and then find nothing left to do.
 * Migration SQL must not name a schema: it runs with `search_path` set to the target schema.
 */
export async function applyMigrations(
  session: SqlSession,
  schema: string,
  migrations: readonly Migration[],
): Promise<MigrationResult> {
  const lockKey = `unimatrix-migrate:${schema}`;
  await session.query("SELECT pg_advisory_lock(hashtextextended($1, 0))", [lockKey]);
  try {
    await session.exec(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}; SET search_path TO ${quoteIdent(schema)}`);
    await session.exec(
      `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
         name text PRIMARY KEY,
         checksum text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const rows = await session.query<{ name: string; checksum: string }>(
      `SELECT name, checksum FROM ${MIGRATIONS_TABLE}`,
    );
    const recorded = new Map(rows.map((row) => [row.name, row.checksum]));
    const applied: string[] = [];
    const alreadyApplied: string[] = [];
    for (const migration of migrations) {
      const checksum = recorded.get(migration.name);
      if (checksum !== undefined) {
        if (checksum !== migration.checksum) {
          throw new Error(
            `migration ${migration.name} was changed after it was applied to schema ${schema}; add a new migration instead`,
          );
        }
        alreadyApplied.push(migration.name);
        continue;
      }
      try {
        await session.transaction(async (tx) => {
          await tx.exec(migration.sql);
          await tx.query(`INSERT INTO ${MIGRATIONS_TABLE} (name, checksum) VALUES ($1, $2)`, [
            migration.name,
            migration.checksum,
          ]);
        });
      } catch (error) {
        throw new Error(`migration ${migration.name} failed: ${(error as Error).message}`, { cause: error });
      }
      applied.push(migration.name);
    }
    // A newer build may have migrated already (rolling upgrade): report, do not refuse to start.
    const newer = [...recorded.keys()].filter((name) => !migrations.some((m) => m.name === name));
    return { applied, alreadyApplied, newer };
  } finally {
    await session.query("SELECT pg_advisory_unlock(hashtextextended($1, 0))", [lockKey]);
  }
}

/** Applies a service's migrations (`<dir>/<name>/migration.sql`) to an opened store, on a session of its own. */
export async function migrateDatabase(database: Database, migrationsDir: string): Promise<MigrationResult> {
  const session = await database.openSession();
  try {
    return await applyMigrations(session, database.schema, readMigrations(migrationsDir));
  } finally {
    await session.close();
  }
}
