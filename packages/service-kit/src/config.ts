import { z } from "zod";

/** One environment variable a service reads: its name, meaning, default and validation. */
export interface EnvVar<T = unknown> {
  readonly name: string;
  readonly description: string;
  /** The default as written in docs; undefined when the variable is optional or required. */
  readonly defaultValue?: string;
  readonly schema: z.ZodType<T>;
}

/** Thrown at start-up when an environment variable is missing or malformed; names the variable. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    reason: string,
  ) {
    super(`invalid configuration: ${variable} ${reason}`);
    this.name = "ConfigError";
  }
}

/** Declares an environment variable. */
export function envVar<T>(name: string, description: string, schema: z.ZodType<T>, defaultValue?: string): EnvVar<T> {
  return { name, description, schema, defaultValue };
}

/** A TCP port, 0 for "any free port". */
export const portSchema = z.coerce.number().int().min(0).max(65535);
/** A positive whole number of milliseconds. */
export const millisSchema = z.coerce.number().int().positive();

const urlWithScheme = (schemes: string[]) =>
  z.string().refine(
    (value) => {
      try {
        return schemes.includes(new URL(value).protocol);
      } catch {
        return false;
      }
    },
    `must be a URL starting with ${schemes.map((s) => `${s}//`).join(" or ")}`,
  );

/** Variables every service reads. */
export const commonEnv = {
  databaseUrl: envVar(
    "DATABASE_URL",
    "Postgres connection URL. Unset: the embedded PGlite store under UMX_DATA_DIR.",
    urlWithScheme(["postgres:", "postgresql:"]).optional(),
  ),
  redisUrl: envVar(
    "REDIS_URL",
    "Redis URL for the event bus. Unset: an in-process bus (single-process embedded default).",
    urlWithScheme(["redis:", "rediss:"]).optional(),
  ),
  busPrefix: envVar(
    "UMX_BUS_PREFIX",
    "Prefix of every Redis channel and key, so several installations can share one Redis.",
    z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be 1-64 letters, digits, '_', '.' or '-'"),
    "umx",
  ),
  dataDir: envVar(
    "UMX_DATA_DIR",
    "Directory of the embedded store when DATABASE_URL is unset: one PGlite (pglite/) shared by the services of one process, each in its own schema.",
    z.string().min(1),
    "./data",
  ),
  internalKey: envVar(
    "UMX_INTERNAL_KEY",
    "Shared HMAC key (>= 32 chars) that signs principals between gateway and services. Required with DATABASE_URL; the embedded default makes one under UMX_DATA_DIR.",
    z.string().min(32, "must be at least 32 characters").optional(),
  ),
  operatorToken: envVar(
    "UMX_OPERATOR_TOKEN",
    "Bootstrap/admin bearer token (umx_operator_...). Unset: no operator access.",
    z
      .string()
      .regex(/^umx_operator_[A-Za-z0-9_-]{16,}$/, "must look like umx_operator_<at least 16 characters>")
      .optional(),
  ),
  bindHost: envVar("UMX_BIND_HOST", "Address every listener binds to.", z.string().min(1), "0.0.0.0"),
  logLevel: envVar(
    "LOG_LEVEL",
    "pino log level.",
    z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]),
    "info",
  ),
  shutdownGraceMs: envVar(
    "UMX_SHUTDOWN_GRACE_MS",
    "How long a stopping service lets open calls and streams finish before cutting them.",
    millisSchema,
    "10000",
  ),
  drainDelayMs: envVar(
    "UMX_DRAIN_DELAY_MS",
    "On SIGTERM a service answers health NOT_SERVING at once and keeps serving this long (so load balancers and resolvers move away) before its streams get a typed going-away and it stops.",
    z.coerce.number().int().min(0),
    "5000",
  ),
  dbProbeMs: envVar(
    "UMX_DB_PROBE_MS",
    "How often (ms) a service on Postgres checks its database on a connection of its own; while the check fails or finds it read-only, health answers NOT_SERVING (and the gateway's /readyz not ready), SERVING again after the first check that passes (0 = never).",
    z.coerce.number().int().min(0),
    "2000",
  ),
  grpcMaxConnectionAgeMs: envVar(
    "UMX_GRPC_MAX_CONNECTION_AGE_MS",
    "Age after which a service sends a client connection GOAWAY, so clients re-resolve and reach new replicas (0 = never). On grpc-js with keepalive, streams open on it are cut then (UNAVAILABLE) and resume from their cursor, as after a drain.",
    z.coerce.number().int().min(0),
    "300000",
  ),
} as const;

type Shape = Record<string, EnvVar>;
/** The values of a set of variables, typed. */
export type ConfigOf<S extends Shape> = { [K in keyof S]: S[K] extends EnvVar<infer T> ? T : never };

/** Reads and validates variables from the environment; the first bad one throws a ConfigError naming it. */
export function readConfig<S extends Shape>(shape: S, env: NodeJS.ProcessEnv = process.env): ConfigOf<S> {
  const out: Record<string, unknown> = {};
  for (const [key, variable] of Object.entries(shape)) {
    const raw = env[variable.name];
    const given = raw === undefined || raw === "" ? variable.defaultValue : raw;
    const parsed = variable.schema.safeParse(given);
    if (!parsed.success) {
      const reason = parsed.error.issues[0]?.message ?? "is invalid";
      const shown =
        given === undefined ? "unset" : `got ${JSON.stringify(given.length > 60 ? `${given.slice(0, 60)}…` : given)}`;
      throw new ConfigError(variable.name, `${reason} (${shown})`);
    }
    out[key] = parsed.data;
  }
  return out as ConfigOf<S>;
}

/** Every variable the services read, for docs and the parity test. Services register theirs here. */
export const allEnvVars: EnvVar[] = [...Object.values(commonEnv)];

/** Adds a service's own variables to `allEnvVars` and returns them. */
export function registerEnv<S extends Shape>(shape: S): S {
  for (const variable of Object.values(shape)) {
    if (!allEnvVars.some((known) => known.name === variable.name)) allEnvVars.push(variable);
  }
  return shape;
}
