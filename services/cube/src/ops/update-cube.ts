/**
 * UpdateCube: directive, taxonomy and/or retention settings (MANAGE).
 *
 * Lock order: the cube row (update), after the caller's MANAGE is read in the same transaction.
 */

import type { Principal } from "@unimatrix/service-kit/auth";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { type AccessLevel, MANAGE } from "../rules/access";
import { requireAccess } from "../store/access";
import { authTag } from "../store/auth-cache";
import { inTransaction } from "../store/prisma";
import type { Cube } from "../store/rows";
import { updateCubeFields } from "../tables/cubes";

/**
 * Changes directive, taxonomy (empty taxonomy removes it) and/or retention (zero fields: the
 * service default). Effects: the cube's cached access (it carries the taxonomy).
 */
export async function updateCube(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  change: { directive?: string; taxonomyJson?: string; retention?: { maxAgeSeconds: number; maxItems: number } },
): Promise<OpResult<{ cube: Cube; access: AccessLevel }>> {
  if (change.directive === undefined && change.taxonomyJson === undefined && change.retention === undefined)
    throw new InvalidArgumentError("directive", "set directive, taxonomy_json and/or retention");
  const { retention } = change;
  await requireAccess(deps.prisma, principal, cubeId, MANAGE, "updating the cube");
  await deps.guard.admit(Buffer.byteLength(change.directive ?? "") + Buffer.byteLength(change.taxonomyJson ?? ""));
  const now = deps.clock.now();
  const updated = await inTransaction(deps.prisma, async (tx) => {
    const s = await requireAccess(tx, principal, cubeId, MANAGE, "updating the cube");
    const cube = await updateCubeFields(
      tx,
      cubeId,
      {
        ...(change.directive !== undefined ? { directive: change.directive } : {}),
        ...(change.taxonomyJson !== undefined
          ? { taxonomyJson: change.taxonomyJson === "" ? null : change.taxonomyJson }
          : {}),
        ...(retention
          ? {
              retentionMaxAgeSeconds: retention.maxAgeSeconds === 0 ? null : retention.maxAgeSeconds,
              retentionMaxItems: retention.maxItems === 0 ? null : retention.maxItems,
            }
          : {}),
      },
      now,
    );
    return { cube, access: s.access };
  });
  // The taxonomy is cached with access (the append checks kinds against it).
  return { result: updated, effects: { authTags: [authTag.cube(cubeId)] } };
}
