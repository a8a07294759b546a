import { randomBytes } from "node:crypto";
import pg from "pg";
import { commonEnv, readConfig } from "../config";
import type { CommonConfig } from "../service/deps";

/** The Postgres the tests use (a database on the machine's server). */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
/** The Redis the tests use. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
/** A key for signing principals in tests. */
export const TEST_INTERNAL_KEY = "test-internal-key-0123456789abcdef0123456789";

/** A name no other suite or run uses: `<label>_<random>`, lower-case, usable as a schema name. */
export function uniqueName(label: string): string {
  return `${label.toLowerCase().replace(/[^a-z0-9_]/g, "_")}_${randomBytes(5).toString("hex")}`;
}

/** A Postgres schema of its own for one suite; `drop()` removes it and everything in it. */
export interface TestSchema {
  readonly url: string;
  readonly schema: string;
  drop(): Promise<void>;
}

/** Reserves a fresh schema name (the service's migration step creates it). */
export function testSchema(label: string): TestSchema {
  const schema = uniqueName(`t_${label}`);
  return {
    url: TEST_DATABASE_URL,
    schema,
    async drop() {
      const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

/** A bus prefix of its own for one suite. */
export function testBusPrefix(label: string): string {
  return uniqueName(`t-${label}`).replaceAll("_", "-");
}

/** Common config for a service under test: real Postgres and Redis, quiet logs, fast shutdown. */
export function testConfig(overrides: Partial<CommonConfig> = {}): CommonConfig {
  return {
    ...readConfig(commonEnv, {}),
    databaseUrl: TEST_DATABASE_URL,
    redisUrl: TEST_REDIS_URL,
    internalKey: TEST_INTERNAL_KEY,
    bindHost: "127.0.0.1",
    logLevel: "silent",
    shutdownGraceMs: 2_000,
    drainDelayMs: 0,
    ...overrides,
  };
}

/** Resolves when `predicate` holds, polling every 5 ms; rejects after `timeoutMs` naming `what`. */
export async function eventually(
  predicate: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 5_000,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
