import type { Bus } from "@unimatrix/service-kit";
import type { Logger } from "pino";

/** Bus message: new activity was committed up to this position. */
export const ACTIVITY = "activity";
/** Bus message: access changed (revocation, eviction, grant); open streams re-check now. */
export const ACCESS = "access";

/** The bus channel of a cube: its doorbell, rung after a commit with ACTIVITY or ACCESS. */
export function cubeChannel(cubeId: string): string {
  return `cube:${cubeId}`;
}

/** Rings the cubes' doorbells after a commit. A failed publish is logged; readers heal from the DB. */
export function ring(deps: { bus: Bus; logger: Logger }, cubeIds: Iterable<string>, message: string): void {
  for (const cubeId of new Set(cubeIds)) {
    deps.bus.publish(cubeChannel(cubeId), message).catch((error: unknown) => {
      deps.logger.warn({ err: error, cubeId }, "bus publish failed; subscribers will heal from the database");
    });
  }
}
