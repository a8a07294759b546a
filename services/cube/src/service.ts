import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import {
  type GrpcServiceOptions,
  principalResolver,
  type RunningService,
  startGrpcService,
} from "@unimatrix/service-kit";
import { type CubeConfig, readCubeConfig } from "./config";
import { activityHandlers } from "./handlers/activity";
import { cubeHandlers } from "./handlers/cube";
import type { CubeDeps } from "./handlers/deps";
import { identityHandlers } from "./handlers/identity";
import { FeedHub } from "./live/feed";
import { StorageGuard } from "./store/guard";
import { resolveToken } from "./store/identity";
import { scanLiveness } from "./store/liveness";
import { openPrisma } from "./store/prisma";

/** The service's package folder: the nearest folder above this file with a package.json (src/ and dist/src/ alike). */
function packageRoot(from: string): string {
  let dir = from;
  while (!existsSync(join(dir, "package.json"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${from}`);
    dir = up;
  }
  return dir;
}

/** The service's SQL migrations (Prisma layout), found from src/ and dist/src/ alike. */
export const migrationsDir = join(packageRoot(__dirname), "prisma", "migrations");

/** How to start the cube service: config, port and optional shared bus, logger, clock and schema. */
export type CubeServiceOptions = Omit<GrpcServiceOptions, "name" | "migrationsDir" | "wire" | "authenticate"> & {
  /** Overrides of the cube service's own settings (default: read from the environment). */
  readonly cube?: Partial<CubeConfig>;
};

/** A running cube service, with a handle on its liveness scan (tests and operators run a round by hand). */
export interface RunningCube extends RunningService {
  /** Runs one liveness round now; resolves with the drone ids pinged. */
  scanLiveness(): Promise<string[]>;
}

/** Starts the cube service: identity, cubes/roles/seats and the activity log over gRPC. */
export async function startCube(options: CubeServiceOptions): Promise<RunningCube> {
  const config: CubeConfig = { ...readCubeConfig(), ...options.cube };
  let deps: CubeDeps | undefined;
  const depsReady = () => {
    if (!deps) throw new Error("cube service is not wired yet");
    return deps;
  };
  const running = await startGrpcService({
    ...options,
    name: "cube",
    migrationsDir,
    authenticate: ({ internalKey, operatorToken, clock }) =>
      principalResolver({
        internalKey,
        operatorToken,
        now: () => clock.now().getTime(),
        resolveToken: async (parsed) => (await resolveToken(depsReady(), parsed))?.principal ?? null,
      }),
    wire: ({ host, database, bus, logger, clock, operatorToken }) => {
      const prisma = openPrisma(database);
      const wired: CubeDeps = {
        prisma,
        clock,
        bus,
        logger,
        config,
        guard: new StorageGuard(prisma, config.storageBudgetBytes),
      };
      deps = wired;
      const hub = new FeedHub(prisma, bus, logger);
      host.addService(IdentityService, identityHandlers(wired, operatorToken));
      host.addService(CubeService, cubeHandlers(wired));
      host.addService(ActivityService, activityHandlers(wired, hub));
      let timer: NodeJS.Timeout | undefined;
      if (config.livenessIntervalMs > 0) {
        timer = setInterval(() => {
          scanLiveness(wired).catch((error: unknown) => logger.warn({ err: error }, "liveness scan failed"));
        }, config.livenessIntervalMs);
        timer.unref();
      }
      return {
        async close() {
          if (timer) clearInterval(timer);
          await hub.close();
          await prisma.$disconnect();
        },
      };
    },
  });
  return Object.assign(running, { scanLiveness: () => scanLiveness(depsReady()) });
}
