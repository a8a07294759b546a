/** ListCubeGrants: a user sees the tenant's grants, a client (or drone session) its own. */
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import { clientOf, tenantOf } from "../rules/access";
import type { CubeGrant } from "../store/rows";
import { grantsOf } from "../tables/grants";

/** Lists grants: a user sees the tenant's, a client (or drone session) its own. */
export async function listCubeGrants(
  deps: CubeDeps,
  principal: Principal,
  filter: { clientId?: string; cubeId?: string },
  offset: number,
  limit: number,
): Promise<CubeGrant[]> {
  const own = clientOf(principal);
  if (own && filter.clientId && filter.clientId !== own) return [];
  return grantsOf(
    deps.prisma,
    tenantOf(principal),
    { clientId: own ?? filter.clientId, cubeId: filter.cubeId },
    offset,
    limit,
  );
}
