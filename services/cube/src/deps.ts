import type { Bus, Clock } from "@unimatrix/service-kit";
import type { Logger } from "pino";
import type { CubeConfig } from "./config";
import type { StorageGuard } from "./store/guard";
import type { PrismaClient } from "./store/prisma";

/** What the cube service's stores and handlers share. */
export interface CubeDeps {
  readonly prisma: PrismaClient;
  readonly clock: Clock;
  readonly guard: StorageGuard;
  readonly bus: Bus;
  readonly logger: Logger;
  readonly config: CubeConfig;
}

/** Bus message: new activity was committed up to this position. */
export const ACTIVITY = "activity";
/** Bus message: access changed (revocation, eviction, grant); open streams re-check now. */
export const ACCESS = "access";

/** Rings the cube's doorbell after a commit. A failed publish is logged; readers heal from the DB. */
export function ring(deps: Pick<CubeDeps, "bus" | "logger">, cubeIds: Iterable<string>, message: string): void {
  for (const cubeId of new Set(cubeIds)) {
    deps.bus.publish(`cube:${cubeId}`, message).catch((error: unknown) => {
      deps.logger.warn({ err: error, cubeId }, "bus publish failed; subscribers will heal from the database");
    });
  }
}

/** True for a unique-constraint violation from Prisma (any adapter). */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: string; message?: string; cause?: { code?: string } } | null;
  return e?.code === "P2002" || e?.cause?.code === "23505" || /Unique constraint|23505/.test(e?.message ?? "");
}
