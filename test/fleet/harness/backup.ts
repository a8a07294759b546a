import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The schemas the services keep (fixed names, one per service): what a backup holds. */
const SERVICE_SCHEMAS = ["cube", "device", "presence"] as const;

/** What one `pg_dump` took: its file and when the command started and ended (epoch ms). */
export interface Dump {
  readonly file: string;
  readonly startedAt: number;
  readonly endedAt: number;
}

/**
 * The operator's backup (README "Back up and restore"): one `pg_dump -Fc` naming the three schemas,
 * so all three come from one snapshot, taken while the services run. Only the named schemas of
 * the one database in `url` are read.
 */
export async function dumpSchemas(url: string, file: string): Promise<Dump> {
  const startedAt = Date.now();
  await run("pg_dump", ["-Fc", ...SERVICE_SCHEMAS.flatMap((s) => ["-n", s]), "-f", file, url]);
  return { file, startedAt, endedAt: Date.now() };
}

/**
 * The operator's restore: the whole dump with `pg_restore --no-owner --exit-on-error` into an empty
 * database, before any service starts on it (it creates the three schemas; `-n <schema>` would
 * restore a schema's objects but not the schema itself).
 */
export async function restoreSchemas(url: string, file: string): Promise<void> {
  await run("pg_restore", ["--no-owner", "--exit-on-error", "-d", url, file]);
}

/** The position inside an activity cursor (`a` + base64url(16-byte cube id, 8-byte position)). */
export function positionOf(cursor: string): bigint {
  const bytes = Buffer.from(cursor.slice(1), "base64url");
  if (!cursor.startsWith("a") || bytes.length !== 24) throw new Error(`not an activity cursor: ${cursor}`);
  return bytes.readBigUInt64BE(16);
}
