/**
 * EvictDrone: a drone leaves the cube for good; its sessions are revoked.
 *
 * Lock order: the drone row (`FOR UPDATE`) → its sessions. One transaction.
 */

import type { Principal } from "@unimatrix/service-kit/auth";
import { PermissionDeniedError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { MANAGE } from "../rules/access";
import { standing } from "../store/access";
import { authTag } from "../store/auth-cache";
import { inTransaction } from "../store/prisma";
import type { DroneRow } from "../store/rows";
import { droneView } from "../tables/drones";
import { evict, lockCubeDrone } from "../tables/seats";

/**
 * Evicts a drone and revokes its sessions. Idempotent. MANAGE, or the drone's own client.
 * Effects: the drone's cached access is dropped and the cube's open streams re-check it.
 */
export async function evictDrone(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  droneId: string,
): Promise<OpResult<{ drone: DroneRow; revoked: number }>> {
  const s = await standing(deps.prisma, principal, cubeId);
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    const drone = await lockCubeDrone(tx, cubeId, droneId);
    const ownClient = principal.kind === "client" && principal.subjectId === drone.clientId;
    if (s.access < MANAGE && !ownClient)
      throw new PermissionDeniedError("evicting requires manage access or being the drone's client");
    return evict(tx, drone, now);
  });
  return {
    result: { drone: await droneView(deps.prisma, result.drone, now), revoked: result.revoked },
    effects: { authTags: [authTag.drone(droneId)], access: { cubeIds: [cubeId], subjectIds: [droneId] } },
  };
}
