/** ListRoles: a cube's roles by name. */
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import { READ } from "../rules/access";
import { requireAccess } from "../store/access";
import type { Role } from "../store/rows";
import { rolesOf } from "../tables/roles";

/** A cube's roles by name, `limit + 1` after `offset`. Requires READ. */
export async function listRoles(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  offset: number,
  limit: number,
): Promise<Role[]> {
  await requireAccess(deps.prisma, principal, cubeId, READ, "listing roles");
  return rolesOf(deps.prisma, cubeId, offset, limit);
}
