/**
 * SetCubeGrant and RevokeCubeGrant: a client's access to a cube changes (MANAGE on the cube).
 *
 * Lock order: the grant row (upsert or delete), after the caller's MANAGE is read in the same
 * transaction. One transaction.
 */

import type { Principal } from "@unimatrix/service-kit/auth";
import { FailedPreconditionError, NotFoundError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import type { Effects, OpResult } from "../effects";
import { type AccessLevel, MANAGE, tenantOf } from "../rules/access";
import { requireAccess } from "../store/access";
import { authTag } from "../store/auth-cache";
import { inTransaction, type Tx } from "../store/prisma";
import type { CubeGrant } from "../store/rows";
import { clientOfTenant, deleteGrant, upsertGrant } from "../tables/grants";

async function checkGrantCaller(tx: Tx, principal: Principal, cubeId: string, clientId: string) {
  const tenantId = tenantOf(principal);
  const client = await clientOfTenant(tx, tenantId, clientId);
  if (!client) throw new NotFoundError("client not found");
  const { cube } = await requireAccess(tx, principal, cubeId, MANAGE, "changing grants");
  return { client, cube, tenantId };
}

/** A grant changed: the cube's cached access is dropped, its streams re-check the client's. */
const grantChanged = (cubeId: string, clientId: string): Effects => ({
  authTags: [authTag.cube(cubeId)],
  access: { cubeIds: [cubeId], subjectIds: [clientId] },
});

/** Grants (or changes) a client's access to a cube. */
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
    return upsertGrant(tx, { clientId, cubeId, tenantId, access }, now);
  });
  return { result: grant, effects: grantChanged(cubeId, clientId) };
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
    return deleteGrant(tx, clientId, cubeId);
  });
  return { result: removed, effects: removed ? grantChanged(cubeId, clientId) : {} };
}
