/**
 * CreateRole, UpdateRole and PatchRoleSection (MANAGE on the cube).
 *
 * Lock order: the role row (insert, or `FOR UPDATE`) → the cube's other roles (clearing the
 * default), after the caller's MANAGE is read in the same transaction. One transaction each.
 */
import { randomUUID } from "node:crypto";

import type { Principal } from "@unimatrix/service-kit/auth";
import { AlreadyExistsError, InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { isUniqueViolation } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { MANAGE } from "../rules/access";
import { MAX_DOCUMENT_BYTES } from "../rules/request";
import { patchSection, type SectionOp } from "../rules/sections";
import { requireAccess } from "../store/access";
import { authTag } from "../store/auth-cache";
import { inTransaction } from "../store/prisma";
import type { Role } from "../store/rows";
import { clearDefault, insertRole, lockRole, updateRoleFields } from "../tables/roles";

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

/** Creates a role; making it default clears the previous default. No effects. */
export async function createRole(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  fields: RoleFields,
): Promise<OpResult<Role>> {
  await requireAccess(deps.prisma, principal, cubeId, MANAGE, "creating roles");
  await deps.guard.admit(Buffer.byteLength(fields.detailedDescription) + fields.shortDescription.length + 300);
  const now = deps.clock.now();
  try {
    const role = await inTransaction(deps.prisma, async (tx) => {
      await requireAccess(tx, principal, cubeId, MANAGE, "creating roles");
      const id = randomUUID();
      if (fields.isDefault) await clearDefault(tx, cubeId, id);
      return insertRole(tx, { id, cubeId, ...fields, seatCounter: 0, createdAt: now, updatedAt: now });
    });
    return { result: role, effects: {} };
  } catch (error) {
    if (isUniqueViolation(error)) throw taken();
    throw error;
  }
}

/** Changes the given fields of a role. Effects: the cube's cached access (it carries its drones' role flags). */
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
      return updateRoleFields(tx, roleId, change, now);
    });
    // What its drones may broadcast and see is cached with their access.
    return { result: role, effects: { authTags: [authTag.cube(cubeId)] } };
  } catch (error) {
    if (isUniqueViolation(error)) throw taken();
    throw error;
  }
}

/** Adds, replaces or removes one `## <section>` of a role's description. No effects. */
export async function patchRoleSection(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  roleId: string,
  op: SectionOp,
  section: string,
  text: string,
): Promise<OpResult<Role>> {
  await requireAccess(deps.prisma, principal, cubeId, MANAGE, "editing roles");
  await deps.guard.admit(Buffer.byteLength(text) + 100);
  const now = deps.clock.now();
  const role = await inTransaction(deps.prisma, async (tx) => {
    await requireAccess(tx, principal, cubeId, MANAGE, "editing roles");
    const role = await lockRole(tx, cubeId, roleId);
    const next = patchSection(role.detailedDescription, op, section, text);
    if (Buffer.byteLength(next) > MAX_DOCUMENT_BYTES)
      throw new InvalidArgumentError("text", "the resulting description would exceed 100,000 bytes");
    return updateRoleFields(tx, roleId, { detailedDescription: next }, now);
  });
  return { result: role, effects: {} };
}
