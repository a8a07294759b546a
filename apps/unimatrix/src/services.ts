import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cubeEnv, migrationsDir as cubeMigrations, startCube } from "@unimatrix/cube";
import { deviceEnv, migrationsDir as deviceMigrations, startDevice } from "@unimatrix/device";
import { gatewayEnv, startGateway } from "@unimatrix/gateway";
import { presenceEnv, migrationsDir as presenceMigrations, startPresence } from "@unimatrix/presence";
import { type EnvVar, readConfig } from "@unimatrix/service-kit/config";
import { resolveInternalKey, type SystemPart } from "@unimatrix/service-kit/service";

export { internalMethods, PUBLIC_SERVICES, publicMethods } from "./rpcs";

/** One entry of `services.json`: the list the scripts (generate, bench, jest) read too. */
export interface ServiceListing {
  readonly name: string;
  readonly package: string;
  readonly protocol: "grpc" | "http";
  /** Whether it owns a database (Prisma schema, migrations). */
  readonly store: boolean;
}

/** The services in start order, as `services.json` lists them. */
export const SERVICE_LIST: readonly ServiceListing[] = (
  JSON.parse(readFileSync(join(__dirname, "..", "services.json"), "utf8")) as { services: ServiceListing[] }
).services;

/** Service names in start order (the gateway last: it calls the others). */
export const SERVICE_NAMES: readonly string[] = SERVICE_LIST.map((s) => s.name);
export type ServiceName = string;

/** What the composition knows of a service: its settings, migrations, and how to start it in a system. */
export interface ServiceEntry extends ServiceListing {
  /** Its env var record (config parity, docs). */
  readonly env: Readonly<Record<string, EnvVar>>;
  /** Absolute path of its migrations, when it owns a store. */
  readonly migrationsDir?: string;
  /** A system part that starts it from `env` (ports from its own settings). */
  part(env: NodeJS.ProcessEnv): SystemPart;
}

/**
 * How each listed service is started: its settings, its migrations, and a system part that calls
 * the service's own `start<Name>` with the ports read from `env`.
 */
const STARTERS: Record<string, Omit<ServiceEntry, keyof ServiceListing>> = {
  cube: {
    env: cubeEnv,
    migrationsDir: cubeMigrations,
    part: (env) => ({
      name: "cube",
      protocol: "grpc",
      start: (ctx) =>
        startCube({
          config: ctx.config,
          port: readConfig(cubeEnv, env).port,
          metricsPort: readConfig(cubeEnv, env).metricsPort,
          bus: ctx.bus,
          logger: ctx.logger("cube"),
          schema: ctx.schema("cube"),
          // Cube asks presence whose machines are whose: the one in this system (started after cube), unless told otherwise.
          ...(env.CUBE_PRESENCE_ADDRESS ? {} : { cube: { presenceAddressOf: () => ctx.address("presence") } }),
        }),
    }),
  },
  device: {
    env: deviceEnv,
    migrationsDir: deviceMigrations,
    part: (env) => ({
      name: "device",
      protocol: "grpc",
      start: (ctx) =>
        startDevice({
          config: ctx.config,
          port: readConfig(deviceEnv, env).port,
          metricsPort: readConfig(deviceEnv, env).metricsPort,
          bus: ctx.bus,
          logger: ctx.logger("device"),
          schema: ctx.schema("device"),
        }),
    }),
  },
  presence: {
    env: presenceEnv,
    migrationsDir: presenceMigrations,
    part: (env) => ({
      name: "presence",
      protocol: "grpc",
      start: (ctx) => {
        // Presence resolves user and client tokens through cube: the one in this system, unless told otherwise.
        const cubeAddress = env.PRESENCE_CUBE_ADDRESS ? undefined : ctx.address("cube");
        return startPresence({
          config: ctx.config,
          port: readConfig(presenceEnv, env).port,
          metricsPort: readConfig(presenceEnv, env).metricsPort,
          bus: ctx.bus,
          logger: ctx.logger("presence"),
          schema: ctx.schema("presence"),
          ...(cubeAddress ? { presence: { cubeAddress } } : {}),
        });
      },
    }),
  },
  gateway: {
    env: gatewayEnv,
    part: (env) => ({
      name: "gateway",
      protocol: "http",
      start: (ctx) => {
        const gateway = readConfig(gatewayEnv, env);
        return startGateway({
          config: ctx.config,
          gateway: {
            ...gateway,
            // Upstreams started in this system are called on their real ports (so port 0 works).
            cubeAddress: ctx.address("cube") ?? gateway.cubeAddress,
            deviceAddress: ctx.address("device") ?? gateway.deviceAddress,
            presenceAddress: ctx.address("presence") ?? gateway.presenceAddress,
          },
          internalKey: resolveInternalKey(ctx.config),
          bus: ctx.bus,
          logger: ctx.logger("gateway"),
          metricsPort: gateway.metricsPort,
        });
      },
    }),
  },
};

/** THE one list of services, in start order: `services.json` joined with how each is started. */
export const SERVICES: readonly ServiceEntry[] = SERVICE_LIST.map((listing) => {
  const starter = STARTERS[listing.name];
  if (!starter) throw new Error(`services.json lists ${listing.name}, which src/services.ts cannot start`);
  return { ...listing, ...starter };
});

const unlisted = Object.keys(STARTERS).filter((name) => !SERVICE_NAMES.includes(name));
if (unlisted.length > 0) throw new Error(`src/services.ts starts ${unlisted.join(", ")}, missing from services.json`);

/** The entry of a service by name. */
export function serviceEntry(name: string): ServiceEntry {
  const entry = SERVICES.find((s) => s.name === name);
  if (!entry) throw new Error(`unknown service ${name}; choose from ${SERVICE_NAMES.join(", ")}`);
  return entry;
}
