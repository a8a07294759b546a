/**
 * CreateCube: idempotent on (caller, request key).
 *
 * Lock order: the cube row (insert; the unique request key decides a race) → the owner's grant.
 * One transaction.
 */
import { randomUUID } from "node:crypto";
import type { Principal } from "@unimatrix/service-kit/auth";
import { AlreadyExistsError, PermissionDeniedError } from "@unimatrix/service-kit/errors";
import { isUniqueViolation } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { inTransaction } from "../store/prisma";
import type { Cube } from "../store/rows";
import { cubeByRequestKey, insertCube, insertOwnerGrant } from "../tables/cubes";

/** What a new cube is made of. */
export interface NewCube {
  readonly requestKey: string;
  readonly name: string;
  readonly directive: string;
  readonly taxonomyJson: string | undefined;
}

const sameContent = (cube: Cube, input: NewCube) =>
  cube.name === input.name &&
  cube.directive === input.directive &&
  (cube.taxonomyJson ?? undefined) === input.taxonomyJson;

/** Creates a cube owned by the caller, idempotent on (caller, request key). No effects. */
export async function createCube(
  deps: CubeDeps,
  principal: Principal,
  input: NewCube,
): Promise<OpResult<{ cube: Cube; created: boolean }>> {
  if (principal.kind !== "user" && principal.kind !== "client")
    throw new PermissionDeniedError("only users and clients create cubes");
  const tenantId = principal.tenantId;
  const ownerId = principal.subjectId;
  const replay = async () => {
    const existing = await cubeByRequestKey(deps.prisma, tenantId, ownerId, input.requestKey);
    if (!existing) return undefined;
    if (!sameContent(existing, input))
      throw new AlreadyExistsError("request_key was already used for a cube with different content");
    return { result: { cube: existing, created: false }, effects: {} };
  };
  const prior = await replay();
  if (prior) return prior;
  await deps.guard.admit(
    Buffer.byteLength(input.directive) + Buffer.byteLength(input.taxonomyJson ?? "") + input.name.length + 300,
  );
  const now = deps.clock.now();
  try {
    const cube = await inTransaction(deps.prisma, async (tx) => {
      const cube = await insertCube(tx, {
        id: randomUUID(),
        tenantId,
        name: input.name,
        directive: input.directive,
        taxonomyJson: input.taxonomyJson ?? null,
        ownerId,
        ownerKind: principal.kind,
        requestKey: input.requestKey,
        head: 0n,
        retainedFloor: 0n,
        retentionMaxAgeSeconds: null,
        retentionMaxItems: null,
        createdAt: now,
        updatedAt: now,
      });
      if (principal.kind === "client") await insertOwnerGrant(tx, cube, ownerId, now);
      return cube;
    });
    return { result: { cube, created: true }, effects: {} };
  } catch (error) {
    if (isUniqueViolation(error)) {
      const raced = await replay();
      if (raced) return raced;
    }
    throw error;
  }
}
