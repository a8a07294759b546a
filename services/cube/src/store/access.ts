import { NotFoundError, PermissionDeniedError, type Principal } from "@unimatrix/service-kit";
import type { Cube } from "../generated/prisma/client";
import type { Tx } from "./prisma";

/** Access levels, ordered: 0 none, 1 READ, 2 WRITE, 3 MANAGE (the CubeAccess enum values). */
export type AccessLevel = 0 | 1 | 2 | 3;
export const READ = 1;
export const WRITE = 2;
export const MANAGE = 3;

/** The drone a drone-session principal acts as, with what visibility depends on. */
export interface DroneActor {
  readonly id: string;
  readonly label: string;
  readonly roleName: string;
  readonly canBroadcast: boolean;
  readonly receivesAllDirect: boolean;
}

/** A principal's standing in one cube. */
export interface CubeStanding {
  readonly cube: Cube;
  readonly access: AccessLevel;
  /** Set for drone sessions. */
  readonly drone?: DroneActor;
}

/** The tenant of a principal that may touch tenant data; PERMISSION_DENIED for the operator and other contexts' kinds. */
export function tenantOf(principal: Principal): string {
  if (principal.kind === "user" || principal.kind === "client" || principal.kind === "drone-session")
    return principal.tenantId;
  throw new PermissionDeniedError(`a ${principal.kind} principal cannot call this`);
}

/** The client id behind a principal (the client itself, or a drone session's client). */
export function clientOf(principal: Principal): string | undefined {
  if (principal.kind === "client") return principal.subjectId;
  if (principal.kind === "drone-session") return principal.clientId;
  return undefined;
}

/**
 * Resolves a principal's access to a cube. Unknown, foreign or unreadable cubes are NOT_FOUND
 * (no existence oracle); a drone session only sees its own cube.
 */
export async function standing(db: Tx, principal: Principal, cubeId: string): Promise<CubeStanding> {
  const tenantId = tenantOf(principal);
  if (principal.kind === "drone-session" && principal.cubeId !== cubeId) throw new NotFoundError("cube not found");
  const cube = await db.cube.findFirst({ where: { id: cubeId, tenantId } });
  if (!cube) throw new NotFoundError("cube not found");
  if (principal.kind === "user") return { cube, access: MANAGE };
  const clientId = clientOf(principal) as string;
  const grant = await db.cubeGrant.findUnique({ where: { clientId_cubeId: { clientId, cubeId } } });
  const access = (grant?.access ?? 0) as AccessLevel;
  if (access === 0) throw new NotFoundError("cube not found");
  if (principal.kind !== "drone-session") return { cube, access };
  const drone = await db.drone.findUnique({ where: { id: principal.droneId } });
  if (!drone || drone.evictedAt) throw new NotFoundError("cube not found");
  const role = await db.role.findUniqueOrThrow({ where: { id: drone.roleId } });
  return {
    cube,
    access,
    drone: {
      id: drone.id,
      label: drone.label,
      roleName: role.name,
      canBroadcast: role.canBroadcast,
      receivesAllDirect: role.receivesAllDirect,
    },
  };
}

/** Resolves standing and requires `level`: PERMISSION_DENIED when the cube is readable but not enough. */
export async function requireAccess(
  db: Tx,
  principal: Principal,
  cubeId: string,
  level: AccessLevel,
  what: string,
): Promise<CubeStanding> {
  const s = await standing(db, principal, cubeId);
  if (s.access < level) throw new PermissionDeniedError(`${what} requires ${levelName(level)} access to the cube`);
  return s;
}

/** Lower-case name of an access level. */
export function levelName(level: number): string {
  return ["none", "read", "write", "manage"][level] ?? "unknown";
}
