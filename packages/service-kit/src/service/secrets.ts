import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ConfigError } from "../config";
import type { CommonConfig } from "./deps";

/** Writes `value` to `file` unless it exists; returns what the file holds (another process may have won). */
function createOnce(file: string, value: string): string {
  mkdirSync(dirname(file), { recursive: true });
  try {
    writeFileSync(file, value, { mode: 0o600, flag: "wx" });
    return value;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return readFileSync(file, "utf8").trim();
  }
}

/**
 * The internal HMAC key: from config; or, on the embedded default only, one made once and kept
 * under the data directory so separately started local services agree on it.
 */
export function resolveInternalKey(config: Pick<CommonConfig, "internalKey" | "databaseUrl" | "dataDir">): string {
  if (config.internalKey) return config.internalKey;
  if (config.databaseUrl) throw new ConfigError("UMX_INTERNAL_KEY", "is required when DATABASE_URL is set (unset)");
  const file = join(config.dataDir, "internal-key");
  if (existsSync(file)) return readFileSync(file, "utf8").trim();
  return createOnce(file, randomBytes(32).toString("base64url"));
}

/**
 * The operator token: from config; or, on the embedded default only, one made once and kept
 * under the data directory (so `npm start` has an operator without any setup). Undefined when
 * the installation runs on Postgres without one configured: no operator access.
 */
export function resolveOperatorToken(
  config: Pick<CommonConfig, "operatorToken" | "databaseUrl" | "dataDir">,
): string | undefined {
  if (config.operatorToken || config.databaseUrl) return config.operatorToken;
  const file = join(config.dataDir, "operator-token");
  if (existsSync(file)) return readFileSync(file, "utf8").trim();
  return createOnce(file, `umx_operator_${randomBytes(24).toString("base64url").replaceAll("_", "-")}`);
}
