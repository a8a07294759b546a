/** Rows of `cube_grants` (and the `clients` row a grant names). Row SQL only. */
import type { AccessLevel } from "../rules/access";
import type { PrismaClient, Tx } from "../store/prisma";
import type { ApiClient, CubeGrant } from "../store/rows";

/** A client of a tenant, or null. */
export function clientOfTenant(db: PrismaClient | Tx, tenantId: string, clientId: string): Promise<ApiClient | null> {
  return db.apiClient.findFirst({ where: { id: clientId, tenantId } });
}

/** Sets a client's access to a cube (inserting the grant when there is none). */
export function upsertGrant(
  tx: Tx,
  grant: { clientId: string; cubeId: string; tenantId: string; access: AccessLevel },
  now: Date,
): Promise<CubeGrant> {
  const { clientId, cubeId, tenantId, access } = grant;
  return tx.cubeGrant.upsert({
    where: { clientId_cubeId: { clientId, cubeId } },
    create: { clientId, cubeId, tenantId, access, updatedAt: now },
    update: { access, updatedAt: now },
  });
}

/** Deletes a client's grant on a cube; whether there was one. */
export async function deleteGrant(tx: Tx, clientId: string, cubeId: string): Promise<boolean> {
  return (await tx.cubeGrant.deleteMany({ where: { clientId, cubeId } })).count > 0;
}

/** A tenant's grants (of one client and/or cube when named), `limit + 1` after `offset`. */
export function grantsOf(
  db: PrismaClient | Tx,
  tenantId: string,
  filter: { clientId?: string; cubeId?: string },
  offset: number,
  limit: number,
): Promise<CubeGrant[]> {
  return db.cubeGrant.findMany({
    where: { tenantId, clientId: filter.clientId, cubeId: filter.cubeId },
    orderBy: [{ updatedAt: "asc" }, { cubeId: "asc" }, { clientId: "asc" }],
    skip: offset,
    take: limit + 1,
  });
}
