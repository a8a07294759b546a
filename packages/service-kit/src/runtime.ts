import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Logger } from "pino";
import { type Bus, openBus } from "./bus";
import { type Clock, systemClock } from "./clock";
import { ConfigError, type ConfigOf, type commonEnv } from "./config";
import { type Database, openDatabase } from "./database";
import { type Authenticate, GrpcHost } from "./grpc/host";
import { createLogger } from "./logger";
import { migrateDatabase } from "./migrations";
import { callObserver } from "./observe/calls";
import { type MetricsServer, ServiceMetrics, serveMetrics } from "./observe/metrics";

/** The settings every service shares, as read by `readConfig(commonEnv)`. */
export type CommonConfig = ConfigOf<typeof commonEnv>;

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

/** What a service's wiring receives to build its handlers. */
export interface ServiceDeps {
  readonly host: GrpcHost;
  readonly database: Database;
  readonly bus: Bus;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly internalKey: string;
  readonly operatorToken: string | undefined;
  /** The service's Prometheus registry, for its own gauges and counters. */
  readonly metrics: ServiceMetrics;
}

/** What a service's wiring gives back: how callers are authenticated and what to close on stop. */
export interface ServiceWiring {
  /** Called at stop, after the gRPC server drained and before the database closes. */
  close?(): Promise<void>;
}

/** Options of one gRPC service process (or one service inside the embedded process). */
export interface GrpcServiceOptions {
  readonly name: string;
  readonly port: number;
  /** Port of the service's `/metrics` listener (0: any free port); undefined: no listener. */
  readonly metricsPort?: number;
  readonly config: CommonConfig;
  /** Directory of the service's SQL migrations (Prisma layout). */
  readonly migrationsDir: string;
  /** Postgres schema of the service's tables (default: the service name). Tests pass their own. */
  readonly schema?: string;
  /** A bus to share (the embedded default shares one in-process bus); otherwise one is opened. */
  readonly bus?: Bus;
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** Resolves callers; built by the wiring from the deps, so it is given as a factory. */
  readonly authenticate?: (deps: Omit<ServiceDeps, "host">) => Authenticate;
  /** Adds the service's handlers to the host. */
  readonly wire: (deps: ServiceDeps) => Promise<ServiceWiring> | ServiceWiring;
}

/** A started service. */
export interface RunningService {
  readonly name: string;
  /** The bound port (the real one when 0 was asked for). */
  readonly port: number;
  readonly host: GrpcHost;
  readonly database: Database;
  readonly metrics: ServiceMetrics;
  /** The bound metrics port, when a metrics listener runs. */
  readonly metricsPort: number | undefined;
  /** Graceful stop: NOT_SERVING, drain, close wiring, bus (if owned) and database. Idempotent. */
  stop(): Promise<void>;
}

/** Opens the store, migrates it, connects the bus, wires the handlers and listens. */
export async function startGrpcService(options: GrpcServiceOptions): Promise<RunningService> {
  const { config, name } = options;
  const logger = options.logger ?? createLogger(name, config.logLevel);
  const clock = options.clock ?? systemClock;
  const internalKey = resolveInternalKey(config);
  const database = await openDatabase({
    service: name,
    url: config.databaseUrl,
    schema: options.schema ?? name,
    dataDir: config.dataDir,
  });
  const ownsBus = options.bus === undefined;
  let bus: Bus | undefined;
  try {
    const result = await migrateDatabase(database, options.migrationsDir);
    logger.info({ applied: result.applied, schema: database.schema }, "migrations applied");
    if (result.newer.length > 0) logger.warn({ newer: result.newer }, "database has migrations newer than this build");
    bus = options.bus ?? (await openBus({ url: config.redisUrl, prefix: config.busPrefix, logger }));
    const metrics = new ServiceMetrics(name);
    const base = { database, bus, logger, clock, internalKey, operatorToken: config.operatorToken, metrics };
    const host = new GrpcHost({
      logger,
      authenticate: options.authenticate?.(base),
      observe: callObserver(metrics, logger.child({ log: "access" })),
    });
    const wiring = await options.wire({ ...base, host });
    let port: number;
    let metricsServer: MetricsServer | undefined;
    try {
      port = await host.listen(config.bindHost, options.port);
      if (options.metricsPort !== undefined)
        metricsServer = await serveMetrics(metrics.registry, config.bindHost, options.metricsPort);
    } catch (error) {
      await host.shutdown(0);
      await wiring.close?.();
      throw error;
    }
    logger.info(
      {
        port,
        metricsPort: metricsServer?.port,
        store: database.kind,
        bus: config.redisUrl ? "redis" : "in-process",
      },
      `${name} listening`,
    );
    let stopping: Promise<void> | undefined;
    const openBusRef = bus;
    return {
      name,
      port,
      host,
      database,
      metrics,
      metricsPort: metricsServer?.port,
      stop() {
        stopping ??= (async () => {
          await host.shutdown(config.shutdownGraceMs);
          await metricsServer?.close();
          await wiring.close?.();
          if (ownsBus) await openBusRef.close();
          await database.close();
          logger.info(`${name} stopped`);
        })();
        return stopping;
      },
    };
  } catch (error) {
    if (ownsBus) await bus?.close();
    await database.close();
    throw error;
  }
}

/** Runs `stop` once on SIGTERM or SIGINT, then exits (non-zero if stopping failed). */
export function stopOnSignals(stop: () => Promise<void>, logger: Logger): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping");
    stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, "stop failed");
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
}
