import type { Logger } from "pino";
import type { Bus } from "../bus/bus";
import type { Clock, Timers } from "../clock";
import type { EnvVar } from "../config";
import type { Authenticate } from "../grpc/call";
import { addRoutes, type Route } from "../grpc/route";
import { bootService, type RunningService } from "./boot";
import type { Background, CommonConfig, ServiceDeps } from "./deps";

/** What one wiring step gives back. */
export interface Wired {
  /** The gRPC services served, each with a full implementation (`route(Service, impl)`). */
  readonly routes: readonly Route[];
  /** How callers are resolved; built from the deps the wiring opened. */
  readonly authenticate?: Authenticate;
  readonly background?: readonly Background[];
  /** Called at stop, after the server drained and the timers stopped, before the bus and database close. */
  close?(): Promise<void>;
  /** Handles tests or the composition need (e.g. a scan to run by hand). */
  readonly extra?: Record<string, unknown>;
}

/** One backend service, described once: what it is called, reads, migrates and wires. */
export interface ServiceManifest<Config = unknown> {
  readonly name: string;
  /** The service's env var record (for config parity and docs). */
  readonly env: Readonly<Record<string, EnvVar>>;
  /** Absolute path of its `prisma/migrations`. */
  readonly migrationsDir: string;
  readonly readConfig: (env?: NodeJS.ProcessEnv) => Config;
  /** The single wiring step. */
  wire(deps: ServiceDeps, config: Config): Promise<Wired> | Wired;
}

/** Declares a service manifest (an identity function that checks the shape and infers `Config`). */
export function defineService<Config>(manifest: ServiceManifest<Config>): ServiceManifest<Config> {
  return manifest;
}

/** How to start a service from its manifest. */
export interface StartServiceOptions<Config> {
  readonly config: CommonConfig;
  /** Port to listen on (0 = any); default: the service config's `port`, else 0. */
  readonly port?: number;
  /** Port of the `/metrics` listener (0 = any); undefined: no listener (tests). */
  readonly metricsPort?: number;
  /** Overrides of the service's own settings, over `manifest.readConfig(env)`. */
  readonly serviceConfig?: Partial<Config>;
  /** Environment the service config is read from (default: `process.env`). */
  readonly env?: NodeJS.ProcessEnv;
  /** Postgres schema of the service's tables (default: its name). Tests pass their own. */
  readonly schema?: string;
  /** A bus to share (the embedded default shares one in-process bus); otherwise one is opened and owned. */
  readonly bus?: Bus;
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** The timers background jobs run on (default: real ones); tests pass a `ManualClock`. */
  readonly timers?: Timers;
}

/** A service started from a manifest: the running service plus what its wiring exposed. */
export interface StartedService<Config = unknown> extends RunningService {
  readonly serviceConfig: Config;
  readonly extra: Record<string, unknown>;
  /** Runs one round of a named background job now (tests, operators). */
  runBackground(name: string): Promise<unknown>;
}

/**
 * Starts a service from its manifest: open the database, migrate, open the bus, wire, build the
 * host with the wiring's authenticator, add its routes, listen, start its background timers.
 * Stop: NOT_SERVING, drain, stop timers, close the wiring, the bus (if owned) and the database.
 */
export async function startService<Config>(
  manifest: ServiceManifest<Config>,
  options: StartServiceOptions<Config>,
): Promise<StartedService<Config>> {
  const serviceConfig = { ...manifest.readConfig(options.env ?? process.env), ...options.serviceConfig } as Config;
  const configuredPort = (serviceConfig as { port?: unknown }).port;
  let wired: Wired | undefined;
  const running = await bootService(
    {
      name: manifest.name,
      port: options.port ?? (typeof configuredPort === "number" ? configuredPort : 0),
      metricsPort: options.metricsPort,
      config: options.config,
      migrationsDir: manifest.migrationsDir,
      schema: options.schema,
      bus: options.bus,
      logger: options.logger,
      clock: options.clock,
      timers: options.timers,
    },
    async (deps, makeHost) => {
      wired = await manifest.wire(deps, serviceConfig);
      const host = makeHost(wired.authenticate);
      addRoutes(host, wired.routes);
      return { host, background: wired.background ?? [], close: () => wired?.close?.() ?? Promise.resolve() };
    },
  );
  const jobs = new Map((wired?.background ?? []).map((job) => [job.name, job]));
  return Object.assign(running, {
    serviceConfig,
    extra: wired?.extra ?? {},
    runBackground(name: string) {
      const job = jobs.get(name);
      if (!job) return Promise.reject(new Error(`${manifest.name} has no background job ${name}`));
      return job.run(new AbortController().signal);
    },
  });
}
