/** ListCubes and GetCube: the cubes a principal can read, with its access. */

import type { Principal } from "@unimatrix/service-kit/auth";
import { NotFoundError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import { type AccessLevel, clientOf, MANAGE, tenantOf } from "../rules/access";
import { cachedAccess, cubeRow } from "../store/access";
import type { Cube } from "../store/rows";
import { cubesOf, grantsOfClient } from "../tables/cubes";

/** The cubes a principal can read, oldest first, each with the caller's access. */
export async function listCubes(
  deps: CubeDeps,
  principal: Principal,
  offset: number,
  limit: number,
): Promise<{ cube: Cube; access: AccessLevel }[]> {
  const tenantId = tenantOf(principal);
  if (principal.kind === "user") {
    const cubes = await cubesOf(deps.prisma, tenantId, undefined, offset, limit);
    return cubes.map((cube) => ({ cube, access: MANAGE }));
  }
  const clientId = clientOf(principal) as string;
  const grants = await grantsOfClient(
    deps.prisma,
    clientId,
    principal.kind === "drone-session" ? principal.cubeId : undefined,
  );
  const accessOf = new Map(grants.map((g) => [g.cubeId, g.access as AccessLevel]));
  const cubes = await cubesOf(deps.prisma, tenantId, [...accessOf.keys()], offset, limit);
  return cubes.map((cube) => ({ cube, access: accessOf.get(cube.id) ?? 0 }));
}

/** One readable cube with the caller's access. */
export async function getCube(deps: CubeDeps, principal: Principal, cubeId: string) {
  // Access from the auth cache; the cube row (its head moves with every append) is always read.
  const { view, cube } = await cachedAccess(deps, principal, cubeId);
  const row = cube ?? (await cubeRow(deps.fast, tenantOf(principal), cubeId));
  if (!row) throw new NotFoundError("cube not found");
  return { cube: row, access: view.access };
}
