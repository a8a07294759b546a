/** ListDrones and DronesSince: a cube's seats, as any reader of the cube may list them. */

import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import { READ } from "../rules/access";
import type { EntryRef } from "../rules/entry";
import { requireAccess } from "../store/access";
import type { DroneRow } from "../store/rows";
import { droneViews } from "../tables/drones";
import { visibleEntry } from "../tables/entries";

/** A cube's drones, oldest first. Requires READ. */
export async function listDrones(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  includeEvicted: boolean,
  offset: number,
  limit: number,
): Promise<DroneRow[]> {
  await requireAccess(deps.prisma, principal, cubeId, READ, "listing drones");
  const drones = await deps.prisma.drone.findMany({
    where: { cubeId, ...(includeEvicted ? {} : { evictedAt: null }) },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    skip: offset,
    take: limit + 1,
  });
  return droneViews(deps.prisma, drones, deps.clock.now());
}

/** Every non-evicted drone with whether it posted after the anchor (ties on the instant by entry id). */
export async function dronesSince(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  anchor: { time: Date } | { entry: EntryRef },
): Promise<{ drones: DroneRow[]; anchorTime: Date }> {
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "listing drones");
  let anchorTime: Date;
  let anchorId: string | null = null;
  if ("entry" in anchor) {
    // An entry the caller cannot see is not found (no createdAt or seen_since oracle), as for ReadThread.
    const entry = await visibleEntry(deps.prisma, s, cubeId, anchor.entry);
    anchorTime = entry.createdAt;
    anchorId = entry.id;
  } else {
    anchorTime = anchor.time;
  }
  const seen = await deps.prisma.$queryRaw<{ id: string }[]>`
    SELECT d.id::text FROM drones d
    WHERE d.cube_id = ${cubeId}::uuid AND d.evicted_at IS NULL AND EXISTS (
      SELECT 1 FROM activity_items a
      WHERE a.cube_id = d.cube_id AND a.author_drone_id = d.id AND a.item_type = 'entry'
        AND (a.created_at > ${anchorTime} OR (a.created_at = ${anchorTime} AND a.id > ${anchorId}::uuid)))`;
  const seenIds = new Set(seen.map((r) => r.id));
  const drones = await deps.prisma.drone.findMany({
    where: { cubeId, evictedAt: null },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
  });
  const views = await droneViews(deps.prisma, drones, deps.clock.now());
  return { drones: views.map((v) => ({ ...v, seenSince: seenIds.has(v.drone.id) })), anchorTime };
}
