/** Rows of `cubes` (and the owner's first grant). Row SQL only. */
import { MANAGE } from "../rules/access";
import type { PrismaClient, Tx } from "../store/prisma";
import type { Cube, CubeGrant } from "../store/rows";

/** An owner's cube by its request key, or null. */
export function cubeByRequestKey(
  db: PrismaClient | Tx,
  tenantId: string,
  ownerId: string,
  requestKey: string,
): Promise<Cube | null> {
  return db.cube.findUnique({ where: { tenantId_ownerId_requestKey: { tenantId, ownerId, requestKey } } });
}

/** Inserts a cube. */
export function insertCube(tx: Tx, cube: Cube): Promise<Cube> {
  return tx.cube.create({ data: cube });
}

/** Inserts the MANAGE grant of a cube's owning client. */
export function insertOwnerGrant(tx: Tx, cube: Cube, clientId: string, now: Date): Promise<CubeGrant> {
  return tx.cubeGrant.create({
    data: { clientId, cubeId: cube.id, tenantId: cube.tenantId, access: MANAGE, updatedAt: now },
  });
}

/** Changes a cube's directive, taxonomy (null removes it) and/or retention settings (null: the service default). */
export function updateCubeFields(
  tx: Tx,
  cubeId: string,
  change: {
    directive?: string;
    taxonomyJson?: string | null;
    retentionMaxAgeSeconds?: number | null;
    retentionMaxItems?: number | null;
  },
  now: Date,
): Promise<Cube> {
  return tx.cube.update({ where: { id: cubeId }, data: { ...change, updatedAt: now } });
}

/** A tenant's cubes (all, or those among `ids`), oldest first, `limit + 1` after `offset`. */
export function cubesOf(
  db: PrismaClient | Tx,
  tenantId: string,
  ids: string[] | undefined,
  offset: number,
  limit: number,
) {
  return db.cube.findMany({
    where: { tenantId, ...(ids ? { id: { in: ids } } : {}) },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    skip: offset,
    take: limit + 1,
  });
}

/** A client's grants (in one cube when named). */
export function grantsOfClient(db: PrismaClient | Tx, clientId: string, cubeId?: string): Promise<CubeGrant[]> {
  return db.cubeGrant.findMany({ where: { clientId, ...(cubeId ? { cubeId } : {}) } });
}
