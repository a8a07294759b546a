import { randomUUID } from "node:crypto";
import { AlreadyExistsError, InvalidArgumentError, NotFoundError } from "@unimatrix/service-kit";
import type { Principal } from "@unimatrix/service-kit/auth";
import { isUniqueViolation } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { MANAGE, READ } from "../rules/access";
import { MAX_DOCUMENT_BYTES } from "../rules/request";
import { patchSection, type SectionOp } from "../rules/sections";
import { requireAccess } from "./access";
import { authTag } from "./auth-cache";
import { inTransaction, type Tx } from "./prisma";
import type { Role } from "./rows";

/** The editable fields of a role. */
export interface RoleFields {
  name: string;
  shortDescription: string;
  detailedDescription: string;
  roleClass: "queen" | "worker";
  isDefault: boolean;
  mandatory: boolean;
  humanSeat: boolean;
  canBroadcast: boolean;
  receivesAllDirect: boolean;
}

const taken = () => new AlreadyExistsError("a role with that name exists in the cube");

async function clearDefault(tx: Tx, cubeId: string, except: string) {
  await tx.role.updateMany({ where: { cubeId, isDefault: true, id: { not: except } }, data: { isDefault: false } });
}

/** Creates a role; making it default clears the previous default. Requires MANAGE. */
export async function createRole(deps: CubeDeps, principal: Principal, cubeId: string, fields: RoleFields) {
  await requireAccess(deps.prisma, principal, cubeId, MANAGE, "creating roles");
  await deps.guard.admit(Buffer.byteLength(fields.detailedDescription) + fields.shortDescription.length + 300);
  const now = deps.clock.now();
  try {
    return await inTransaction(deps.prisma, async (tx) => {
      await requireAccess(tx, principal, cubeId, MANAGE, "creating roles");
      const id = randomUUID();
      if (fields.isDefault) await clearDefault(tx, cubeId, id);
      return tx.role.create({ data: { id, cubeId, ...fields, seatCounter: 0, createdAt: now, updatedAt: now } });
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw taken();
    throw error;
  }
}

async function lockRole(tx: Tx, cubeId: string, roleId: string): Promise<Role> {
  const rows = await tx.$queryRaw<{ id: string }[]>`
    SELECT id::text FROM roles WHERE id = ${roleId}::uuid AND cube_id = ${cubeId}::uuid FOR UPDATE`;
  if (rows.length === 0) throw new NotFoundError("role not found");
  return tx.role.findUniqueOrThrow({ where: { id: roleId } });
}

/** Changes the given fields of a role. Requires MANAGE. */
export async function updateRole(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  roleId: string,
  change: Partial<RoleFields>,
): Promise<OpResult<Role>> {
  await requireAccess(deps.prisma, principal, cubeId, MANAGE, "updating roles");
  await deps.guard.admit(Buffer.byteLength(change.detailedDescription ?? "") + 100);
  const now = deps.clock.now();
  try {
    const role = await inTransaction(deps.prisma, async (tx) => {
      await requireAccess(tx, principal, cubeId, MANAGE, "updating roles");
      await lockRole(tx, cubeId, roleId);
      if (change.isDefault) await clearDefault(tx, cubeId, roleId);
      return tx.role.update({ where: { id: roleId }, data: { ...change, updatedAt: now } });
    });
    // What its drones may broadcast and see is cached with their access.
    return { result: role, effects: { authTags: [authTag.cube(cubeId)] } };
  } catch (error) {
    if (isUniqueViolation(error)) throw taken();
    throw error;
  }
}

/** A cube's roles by name. Requires READ. */
export async function listRoles(deps: CubeDeps, principal: Principal, cubeId: string, offset: number, limit: number) {
  await requireAccess(deps.prisma, principal, cubeId, READ, "listing roles");
  return deps.prisma.role.findMany({
    where: { cubeId },
    orderBy: [{ name: "asc" }, { id: "asc" }],
    skip: offset,
    take: limit + 1,
  });
}

/** Adds, replaces or removes one `## <section>` of a role's description. Requires MANAGE. */
export async function patchRoleSection(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  roleId: string,
  op: SectionOp,
  section: string,
  text: string,
) {
  await requireAccess(deps.prisma, principal, cubeId, MANAGE, "editing roles");
  await deps.guard.admit(Buffer.byteLength(text) + 100);
  const now = deps.clock.now();
  return inTransaction(deps.prisma, async (tx) => {
    await requireAccess(tx, principal, cubeId, MANAGE, "editing roles");
    const role = await lockRole(tx, cubeId, roleId);
    const next = patchSection(role.detailedDescription, op, section, text);
    if (Buffer.byteLength(next) > MAX_DOCUMENT_BYTES)
      throw new InvalidArgumentError("text", "the resulting description would exceed 100,000 bytes");
    return tx.role.update({ where: { id: roleId }, data: { detailedDescription: next, updatedAt: now } });
  });
}
