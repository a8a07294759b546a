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
const MIGRATIONS_TABLE = "_unimatrix_migrations";

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
 * Every transaction first takes a transaction-level advisory lock keyed by the schema and re-reads
 * whether its migration is recorded, so any number of replicas may start at once (one applies
 * each migration, the others find it done) and nothing relies on session state: no session lock,
 * no session `search_path` (`SET LOCAL` per transaction). That is what works behind PgBouncer in
 * transaction mode, where consecutive transactions of one client may run on different servers.
 * Migration SQL must not name a schema: it runs with `search_path` set to the target schema.
 */
export async function applyMigrations(
  session: SqlSession,
  schema: string,
  migrations: readonly Migration[],
): Promise<MigrationResult> {
  const lockKey = `unimatrix-migrate:${schema}`;
  // One transaction per step through the session's own `transaction` (on the embedded store that
  // holds the store's lock throughout, so no other schema's statement interleaves).
  const locked = <T>(work: (tx: SqlSession) => Promise<T>): Promise<T> =>
    session.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [lockKey]);
      await tx.exec(`SET LOCAL search_path TO ${quoteIdent(schema)}`);
      return work(tx);
    });
  const recorded = await locked(async (tx) => {
    await tx.exec(
      `CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)};
       CREATE TABLE IF NOT EXISTS ${quoteIdent(schema)}.${MIGRATIONS_TABLE} (
         name text PRIMARY KEY,
         checksum text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const rows = await tx.query<{ name: string; checksum: string }>(`SELECT name, checksum FROM ${MIGRATIONS_TABLE}`);
    return new Map(rows.map((row) => [row.name, row.checksum]));
  });
  const applied: string[] = [];
  const alreadyApplied: string[] = [];
  const refuseChanged = (migration: Migration, checksum: string) => {
    if (checksum !== migration.checksum)
      throw new Error(
        `migration ${migration.name} was changed after it was applied to schema ${schema}; add a new migration instead`,
      );
  };
  for (const migration of migrations) {
    const known = recorded.get(migration.name);
    if (known !== undefined) {
      refuseChanged(migration, known);
      alreadyApplied.push(migration.name);
      continue;
    }
    const outcome = await locked(async (tx) => {
      // Re-checked under the lock: another replica may have applied it since the first read.
      const [row] = await tx.query<{ checksum: string }>(`SELECT checksum FROM ${MIGRATIONS_TABLE} WHERE name = $1`, [
        migration.name,
      ]);
      if (row) {
        refuseChanged(migration, row.checksum);
        return "already" as const;
      }
      try {
        await tx.exec(migration.sql);
      } catch (error) {
        throw new Error(`migration ${migration.name} failed: ${(error as Error).message}`, { cause: error });
      }
      await tx.query(`INSERT INTO ${MIGRATIONS_TABLE} (name, checksum) VALUES ($1, $2)`, [
        migration.name,
        migration.checksum,
      ]);
      return "applied" as const;
    });
    (outcome === "applied" ? applied : alreadyApplied).push(migration.name);
  }
  // A newer build may have migrated already (rolling upgrade): report, do not refuse to start.
  const newer = [...recorded.keys()].filter((name) => !migrations.some((m) => m.name === name));
  return { applied, alreadyApplied, newer };
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
