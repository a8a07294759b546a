/** ReadActivity: a page of the log after a cursor, as the caller may see it. */
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import { READ } from "../rules/access";
import { cursorPosition } from "../rules/cursor";
import { viewerOf } from "../rules/visibility";
import { type CubeStanding, requireAccess } from "../store/access";
import { type ItemPage, loadItems, scanVisible } from "../tables/entries";

/** The position a cursor names in the standing's cube (nothing is pruned yet: the floor is 0). */
export function positionOf(field: string, s: CubeStanding, cursor: string): bigint {
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
  return { items: await loadItems(deps.prisma, page.rows), after, last: page.last, hasMore: page.hasMore };
}
