/** Rows of `roles`. Row SQL only. */
import { NotFoundError } from "@unimatrix/service-kit/errors";
import type { PrismaClient, Tx } from "../store/prisma";
import type { Role } from "../store/rows";

/** Clears the default flag of a cube's roles other than `except`. */
export async function clearDefault(tx: Tx, cubeId: string, except: string): Promise<void> {
  await tx.role.updateMany({ where: { cubeId, isDefault: true, id: { not: except } }, data: { isDefault: false } });
}

/** Inserts a role. */
export function insertRole(tx: Tx, role: Role): Promise<Role> {
  return tx.role.create({ data: role });
}

/** A role of a cube locked `FOR UPDATE`, else NOT_FOUND. */
export async function lockRole(tx: Tx, cubeId: string, roleId: string): Promise<Role> {
  const rows = await tx.$queryRaw<{ id: string }[]>`
    SELECT id::text FROM roles WHERE id = ${roleId}::uuid AND cube_id = ${cubeId}::uuid FOR UPDATE`;
  if (rows.length === 0) throw new NotFoundError("role not found");
  return tx.role.findUniqueOrThrow({ where: { id: roleId } });
}

/** Changes a role's fields. */
export function updateRoleFields(tx: Tx, roleId: string, change: Partial<Role>, now: Date): Promise<Role> {
  return tx.role.update({ where: { id: roleId }, data: { ...change, updatedAt: now } });
}

/** A cube's roles by name, `limit + 1` after `offset`. */
export function rolesOf(db: PrismaClient | Tx, cubeId: string, offset: number, limit: number): Promise<Role[]> {
  return db.role.findMany({
    where: { cubeId },
    orderBy: [{ name: "asc" }, { id: "asc" }],
    skip: offset,
    take: limit + 1,
  });
}
