import { FailedPreconditionError, NotFoundError } from "@unimatrix/service-kit";
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { type AccessLevel, clientOf, MANAGE, tenantOf } from "../rules/access";
import { requireAccess } from "./access";
import { authTag } from "./auth-cache";
import { inTransaction, type Tx } from "./prisma";
import type { CubeGrant } from "./rows";

async function checkGrantCaller(tx: Tx, principal: Principal, cubeId: string, clientId: string) {
  const tenantId = tenantOf(principal);
  const client = await tx.apiClient.findFirst({ where: { id: clientId, tenantId } });
  if (!client) throw new NotFoundError("client not found");
  const { cube } = await requireAccess(tx, principal, cubeId, MANAGE, "changing grants");
  return { client, cube, tenantId };
}

/** Grants (or changes) a client's access to a cube. Effects: the cube's cached access dropped, its streams re-check. */
export async function setCubeGrant(
  deps: CubeDeps,
  principal: Principal,
  clientId: string,
  cubeId: string,
  access: AccessLevel,
): Promise<OpResult<CubeGrant>> {
  await deps.guard.admit(200);
  const now = deps.clock.now();
  const grant = await inTransaction(deps.prisma, async (tx) => {
    const { client, tenantId } = await checkGrantCaller(tx, principal, cubeId, clientId);
    if (client.revokedAt) throw new FailedPreconditionError("client is revoked");
    return tx.cubeGrant.upsert({
      where: { clientId_cubeId: { clientId, cubeId } },
      create: { clientId, cubeId, tenantId, access, updatedAt: now },
      update: { access, updatedAt: now },
    });
  });
  return {
    result: grant,
    effects: { authTags: [authTag.cube(cubeId)], access: { cubeIds: [cubeId], subjectIds: [clientId] } },
  };
}

/** Removes a client's grant on a cube; the owner's own grant stays. Idempotent. */
export async function revokeCubeGrant(
  deps: CubeDeps,
  principal: Principal,
  clientId: string,
  cubeId: string,
): Promise<OpResult<boolean>> {
  const removed = await inTransaction(deps.prisma, async (tx) => {
    const { cube } = await checkGrantCaller(tx, principal, cubeId, clientId);
    if (cube.ownerKind === "client" && cube.ownerId === clientId)
      throw new FailedPreconditionError("the cube owner's grant cannot be removed");
    const result = await tx.cubeGrant.deleteMany({ where: { clientId, cubeId } });
    return result.count > 0;
  });
  if (!removed) return { result: false, effects: {} };
  return {
    result: true,
    effects: { authTags: [authTag.cube(cubeId)], access: { cubeIds: [cubeId], subjectIds: [clientId] } },
  };
}

/** Lists grants: a user sees the tenant's, a client (or drone session) its own. */
export async function listCubeGrants(
  deps: CubeDeps,
  principal: Principal,
  filter: { clientId?: string; cubeId?: string },
  offset: number,
  limit: number,
): Promise<CubeGrant[]> {
  const tenantId = tenantOf(principal);
  const own = clientOf(principal);
  if (own && filter.clientId && filter.clientId !== own) return [];
  return deps.prisma.cubeGrant.findMany({
    where: { tenantId, clientId: own ?? filter.clientId, cubeId: filter.cubeId },
    orderBy: [{ updatedAt: "asc" }, { cubeId: "asc" }, { clientId: "asc" }],
    skip: offset,
    take: limit + 1,
  });
}
