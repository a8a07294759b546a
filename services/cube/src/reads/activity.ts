/** ReadActivity: a page of the log after a cursor, as the caller may see it. */
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import { READ } from "../rules/access";
import { cursorPosition, expired } from "../rules/cursor";
import { viewerOf } from "../rules/visibility";
import { type CubeStanding, requireAccess } from "../store/access";
import { floorOf, type ItemPage, loadItems, scanVisible } from "../tables/entries";

/** The position a cursor names in the standing's cube: behind the retained floor is FAILED_PRECONDITION (expired). */
function positionOf(field: string, s: CubeStanding, cursor: string): bigint {
  return cursorPosition(field, s.cube.id, { head: BigInt(s.cube.head), floor: s.cube.retainedFloor }, cursor);
}

/**
 * Where a stream resumes: like `positionOf`, but a cursor behind the retained floor is not an
 * error — the stream's catch-up answers it with a `reset` to the floor. Empty = the floor.
 */
export function streamStart(field: string, s: CubeStanding, cursor: string): bigint {
  if (cursor === "") return s.cube.retainedFloor;
  return cursorPosition(field, s.cube.id, { head: BigInt(s.cube.head), floor: 0n }, cursor);
}

/** A page of visible activity after a cursor. Requires READ. */
export async function readActivity(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  cursor: string,
  limit: number,
): Promise<ItemPage> {
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "reading");
  const after = positionOf("cursor", s, cursor);
  const page = await scanVisible(deps.prisma, cubeId, after, viewerOf(s), limit);
  // Retention raises the floor before it deletes: a floor that passed `after` meanwhile may have
  // taken rows from under this scan, so the page would have a hole. Expired, as if read a moment later.
  if ((await floorOf(deps.prisma, cubeId)) > after) throw expired("cursor");
  return { items: await loadItems(deps.prisma, page.rows), after, last: page.last, hasMore: page.hasMore };
}
