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
  const [grant, seat] = await Promise.all([
    db.cubeGrant.findUnique({ where: { clientId_cubeId: { clientId, cubeId } } }),
    principal.kind === "drone-session" ? droneWithRole(db, principal.droneId) : Promise.resolve(undefined),
  ]);
  const access = (grant?.access ?? 0) as AccessLevel;
  if (access === 0) throw new NotFoundError("cube not found");
  if (principal.kind !== "drone-session") return { cube, access };
  if (!seat || seat.evicted_at) throw new NotFoundError("cube not found");
  const drone = { id: seat.id, label: seat.label };
  const role = { name: seat.role_name, canBroadcast: seat.can_broadcast, receivesAllDirect: seat.receives_all_direct };
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

async function droneWithRole(db: Tx, droneId: string) {
  const rows = await db.$queryRaw<
    {
      id: string;
      label: string;
      evicted_at: Date | null;
      role_name: string;
      can_broadcast: boolean;
      receives_all_direct: boolean;
    }[]
  >`SELECT d.id::text, d.label, d.evicted_at, r.name AS role_name, r.can_broadcast, r.receives_all_direct
    FROM drones d JOIN roles r ON r.id = d.role_id WHERE d.id = ${droneId}::uuid`;
  return rows[0];
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
