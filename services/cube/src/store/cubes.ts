import { randomUUID } from "node:crypto";
import { AlreadyExistsError, InvalidArgumentError, NotFoundError, PermissionDeniedError } from "@unimatrix/service-kit";
import type { Principal } from "@unimatrix/service-kit/auth";
import { isUniqueViolation } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { type AccessLevel, clientOf, MANAGE, tenantOf } from "../rules/access";
import { cachedAccess, cubeRow, requireAccess } from "./access";
import { authTag } from "./auth-cache";
import { inTransaction } from "./prisma";
import type { Cube } from "./rows";

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

/** Creates a cube owned by the caller, idempotent on (caller, request key). */
export async function createCube(
  deps: CubeDeps,
  principal: Principal,
  input: NewCube,
): Promise<{ cube: Cube; created: boolean }> {
  if (principal.kind !== "user" && principal.kind !== "client")
    throw new PermissionDeniedError("only users and clients create cubes");
  const tenantId = principal.tenantId;
  const ownerId = principal.subjectId;
  const replay = async () => {
    const existing = await deps.prisma.cube.findUnique({
      where: { tenantId_ownerId_requestKey: { tenantId, ownerId, requestKey: input.requestKey } },
    });
    if (!existing) return undefined;
    if (!sameContent(existing, input))
      throw new AlreadyExistsError("request_key was already used for a cube with different content");
    return { cube: existing, created: false };
  };
  const prior = await replay();
  if (prior) return prior;
  await deps.guard.admit(
    Buffer.byteLength(input.directive) + Buffer.byteLength(input.taxonomyJson ?? "") + input.name.length + 300,
  );
  const now = deps.clock.now();
  try {
    const cube = await inTransaction(deps.prisma, async (tx) => {
      const cube = await tx.cube.create({
        data: {
          id: randomUUID(),
          tenantId,
          name: input.name,
          directive: input.directive,
          taxonomyJson: input.taxonomyJson ?? null,
          ownerId,
          ownerKind: principal.kind,
          requestKey: input.requestKey,
          head: 0n,
          createdAt: now,
          updatedAt: now,
        },
      });
      if (principal.kind === "client") {
        await tx.cubeGrant.create({
          data: { clientId: ownerId, cubeId: cube.id, tenantId, access: MANAGE, updatedAt: now },
        });
      }
      return cube;
    });
    return { cube, created: true };
  } catch (error) {
    if (isUniqueViolation(error)) {
      const raced = await replay();
      if (raced) return raced;
    }
    throw error;
  }
}

/** The cubes a principal can read, oldest first, each with the caller's access. */
export async function listCubes(
  deps: CubeDeps,
  principal: Principal,
  offset: number,
  limit: number,
): Promise<{ cube: Cube; access: AccessLevel }[]> {
  const tenantId = tenantOf(principal);
  if (principal.kind === "user") {
    const cubes = await deps.prisma.cube.findMany({
      where: { tenantId },
      orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      skip: offset,
      take: limit + 1,
    });
    return cubes.map((cube) => ({ cube, access: MANAGE }));
  }
  const clientId = clientOf(principal) as string;
  const grants = await deps.prisma.cubeGrant.findMany({
    where: { clientId, ...(principal.kind === "drone-session" ? { cubeId: principal.cubeId } : {}) },
  });
  const accessOf = new Map(grants.map((g) => [g.cubeId, g.access as AccessLevel]));
  const cubes = await deps.prisma.cube.findMany({
    where: { tenantId, id: { in: [...accessOf.keys()] } },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    skip: offset,
    take: limit + 1,
  });
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

/** Changes directive and/or taxonomy (empty taxonomy removes it). Requires MANAGE. */
export async function updateCube(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  change: { directive?: string; taxonomyJson?: string },
): Promise<OpResult<{ cube: Cube; access: AccessLevel }>> {
  if (change.directive === undefined && change.taxonomyJson === undefined)
    throw new InvalidArgumentError("directive", "set directive and/or taxonomy_json");
  await requireAccess(deps.prisma, principal, cubeId, MANAGE, "updating the cube");
  await deps.guard.admit(Buffer.byteLength(change.directive ?? "") + Buffer.byteLength(change.taxonomyJson ?? ""));
  const now = deps.clock.now();
  const updated = await inTransaction(deps.prisma, async (tx) => {
    const s = await requireAccess(tx, principal, cubeId, MANAGE, "updating the cube");
    const cube = await tx.cube.update({
      where: { id: cubeId },
      data: {
        ...(change.directive !== undefined ? { directive: change.directive } : {}),
        ...(change.taxonomyJson !== undefined
          ? { taxonomyJson: change.taxonomyJson === "" ? null : change.taxonomyJson }
          : {}),
        updatedAt: now,
      },
    });
    return { cube, access: s.access };
  });
  // The taxonomy is cached with access (the append checks kinds against it).
  return {
    result: { cube: updated.cube, access: updated.access as AccessLevel },
    effects: { authTags: [authTag.cube(cubeId)] },
  };
}
