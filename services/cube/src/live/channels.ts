import { type Bus, publishAfterCommit } from "@unimatrix/service-kit/bus";
import type { Logger } from "pino";

/** Bus message: new activity was committed up to this position. */
export const ACTIVITY = "activity";
/** Bus message: access changed (revocation, eviction, grant); open streams re-check now. */
export const ACCESS = "access";

/** The bus channel of a cube: its doorbell, rung after a commit with ACTIVITY or ACCESS. */
export function cubeChannel(cubeId: string): string {
  return `cube:${cubeId}`;
}

/** Rings the cubes' doorbells after a commit (the kit's post-commit publish: awaited, never throws, failures logged). */
export async function ringAfterCommit(
  deps: { bus: Bus; logger: Logger },
  cubeIds: Iterable<string>,
  message: typeof ACTIVITY | typeof ACCESS,
): Promise<void> {
  await publishAfterCommit(deps.bus, [...new Set(cubeIds)].map(cubeChannel), message, deps.logger);
}
