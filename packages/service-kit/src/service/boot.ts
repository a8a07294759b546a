import type { Logger } from "pino";
import { type Bus, openBus } from "../bus/bus";
import { type Clock, systemClock, systemTimers, type Timers } from "../clock";
import type { Authenticate } from "../grpc/call";
import { GrpcHost } from "../grpc/host";
import { createLogger } from "../logger";
import { callObserver } from "../observe/calls";
import { observeDeps } from "../observe/deps-metrics";
import { type MetricsServer, ServiceMetrics, serveMetrics } from "../observe/metrics";
import { startTracing } from "../observe/tracing";
import { type Database, openDatabase } from "../store/database";
import { migrateDatabase } from "../store/migrations";
import { watchDatabase } from "./db-readiness";
import type { Background, CommonConfig, ServiceDeps } from "./deps";
import { resolveInternalKey } from "./secrets";

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
  /** Graceful stop: NOT_SERVING, drain, stop timers, close wiring, bus (if owned) and database. Idempotent. */
  stop(): Promise<void>;
}

/** What `bootService` needs besides the wiring. */
export interface BootOptions {
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
  /** The timers background jobs run on (default: real ones); tests pass a `ManualClock`. */
  readonly timers?: Timers;
}

/** What a boot wiring returns: the host it built (with its services) and what the kit runs and closes. */
export interface Booted {
  readonly host: GrpcHost;
  readonly background: readonly Background[];
  close(): Promise<void>;
}

/** Runs a background job every `everyMs`, never overlapping itself; returns the stop function. */
function schedule(job: Background, timers: Timers, logger: Logger): () => Promise<void> {
  if (job.everyMs <= 0) return async () => {};
  let running: Promise<unknown> | undefined;
  const stopping = new AbortController();
  const stop = timers.every(job.everyMs, () => {
    if (running) return;
    running = job
      .run(stopping.signal)
      .catch((error: unknown) => logger.warn({ err: error, job: job.name }, "background job failed"))
      .finally(() => {
        running = undefined;
      });
  });
  return async () => {
    stop();
    stopping.abort();
    await running;
  };
}

/**
 * The one start path under `startService`: open the store, migrate it,
 * connect the bus, let `wire` build the host (the host factory takes the authenticator the wiring
 * made), listen, schedule background jobs.
 */
export async function bootService(
  options: BootOptions,
  wire: (deps: ServiceDeps, makeHost: (authenticate?: Authenticate) => GrpcHost) => Promise<Booted>,
): Promise<RunningService> {
  const { config, name } = options;
  startTracing(); // once per process (the composition names it first); a no-op afterwards
  const logger = options.logger ?? createLogger(name, config.logLevel);
  const clock = options.clock ?? systemClock;
  const timers = options.timers ?? systemTimers;
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
    const unobserve = observeDeps(metrics, { database, bus });
    const deps: ServiceDeps = {
      database,
      bus,
      logger,
      clock,
      internalKey,
      operatorToken: config.operatorToken,
      config,
      metrics,
    };
    const observe = callObserver(metrics, logger.child({ log: "access" }));
    const booted = await wire(
      deps,
      (authenticate) =>
        new GrpcHost({ logger, authenticate, observe, maxConnectionAgeMs: config.grpcMaxConnectionAgeMs }),
    );
    const { host } = booted;
    let port: number;
    let metricsServer: MetricsServer | undefined;
    try {
      port = await host.listen(config.bindHost, options.port);
      if (options.metricsPort !== undefined)
        metricsServer = await serveMetrics(metrics.registry, config.bindHost, options.metricsPort);
    } catch (error) {
      await host.shutdown(0);
      await booted.close();
      throw error;
    }
    // Readiness follows the database (Postgres only: PGlite is in-process).
    const probe =
      database.kind === "postgres"
        ? [watchDatabase(database, host.health, { everyMs: config.dbProbeMs, logger, metrics })]
        : [];
    const jobs = [...booted.background, ...probe].map((job) => schedule(job, timers, logger));
    logger.info(
      { port, metricsPort: metricsServer?.port, store: database.kind, bus: config.redisUrl ? "redis" : "in-process" },
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
          // On the in-process bus there is no other replica to move to: no drain delay.
          await host.shutdown(config.shutdownGraceMs, config.redisUrl ? config.drainDelayMs : 0);
          await metricsServer?.close();
          await Promise.all(jobs.map((stop) => stop()));
          await booted.close();
          unobserve();
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
