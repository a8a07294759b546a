/** ListDecisions: a cube's decisions, newest first. */
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import { READ } from "../rules/access";
import { requireAccess } from "../store/access";
import type { Decision } from "../store/rows";
import { decisionsOf } from "../tables/decisions";

/** Decisions newest first, `limit + 1` after `offset`. Requires READ. */
export async function listDecisions(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  offset: number,
  limit: number,
): Promise<Decision[]> {
  await requireAccess(deps.prisma, principal, cubeId, READ, "listing decisions");
  return decisionsOf(deps.prisma, cubeId, offset, limit);
}
