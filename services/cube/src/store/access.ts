import { NotFoundError } from "@unimatrix/service-kit";
import type { Principal } from "@unimatrix/service-kit/auth";
import type { RawQuery } from "@unimatrix/service-kit/store";
import { type AccessLevel, clientOf, MANAGE, requireLevel, tenantOf } from "../rules/access";
import type { Cube } from "./rows";

/** The drone a drone-session principal acts as, with what visibility depends on. */
export interface DroneActor {
  readonly id: string;
  readonly label: string;
  readonly roleName: string;
  readonly canBroadcast: boolean;
  readonly receivesAllDirect: boolean;
  /** Whether its role is a human seat (its replies answer questions). */
  readonly humanSeat: boolean;
}

/** A principal's standing in one cube. */
export interface CubeStanding {
  readonly cube: Cube;
  readonly access: AccessLevel;
  /** Set for drone sessions. */
  readonly drone?: DroneActor;
}

/**
 * Resolves a principal's access to a cube. Unknown, foreign or unreadable cubes are NOT_FOUND
 * (no existence oracle); a drone session only sees its own cube.
 */
export async function standing(db: RawQuery, principal: Principal, cubeId: string): Promise<CubeStanding> {
  const tenantId = tenantOf(principal);
  if (principal.kind === "drone-session" && principal.cubeId !== cubeId) throw new NotFoundError("cube not found");
  const clientId = clientOf(principal) ?? null;
  const droneId = principal.kind === "drone-session" ? principal.droneId : null;
  // One round trip: the cube, the client's grant and (for a drone session) the drone and its role.
  const [row] = await db.$queryRaw<
    (CubeRow & {
      access: number | null;
      drone_id: string | null;
      drone_label: string | null;
      drone_evicted_at: Date | null;
      role_name: string | null;
      can_broadcast: boolean | null;
      receives_all_direct: boolean | null;
      human_seat: boolean | null;
    })[]
  >`
    SELECT c.id::text, c.tenant_id::text, c.name, c.directive, c.taxonomy_json, c.owner_id::text, c.owner_kind,
           c.request_key::text, c.head, c.created_at, c.updated_at,
           g.access, d.id::text AS drone_id, d.label AS drone_label, d.evicted_at AS drone_evicted_at,
           r.name AS role_name, r.can_broadcast, r.receives_all_direct, r.human_seat
    FROM cubes c
    LEFT JOIN cube_grants g ON g.cube_id = c.id AND g.client_id = ${clientId}::uuid
    LEFT JOIN drones d ON d.id = ${droneId}::uuid AND d.cube_id = c.id
    LEFT JOIN roles r ON r.id = d.role_id
    WHERE c.id = ${cubeId}::uuid AND c.tenant_id = ${tenantId}::uuid`;
  if (!row) throw new NotFoundError("cube not found");
  const cube: Cube = {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    directive: row.directive,
    taxonomyJson: row.taxonomy_json,
    ownerId: row.owner_id,
    ownerKind: row.owner_kind,
    requestKey: row.request_key,
    head: BigInt(row.head),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  if (principal.kind === "user") return { cube, access: MANAGE };
  const access = (row.access ?? 0) as AccessLevel;
  if (access === 0) throw new NotFoundError("cube not found");
  if (principal.kind !== "drone-session") return { cube, access };
  if (!row.drone_id || row.drone_evicted_at) throw new NotFoundError("cube not found");
  return {
    cube,
    access,
    drone: {
      id: row.drone_id,
      label: row.drone_label ?? "",
      roleName: row.role_name ?? "",
      canBroadcast: row.can_broadcast ?? false,
      receivesAllDirect: row.receives_all_direct ?? false,
      humanSeat: row.human_seat ?? false,
    },
  };
}

interface CubeRow {
  id: string;
  tenant_id: string;
  name: string;
  directive: string;
  taxonomy_json: string | null;
  owner_id: string;
  owner_kind: string;
  request_key: string;
  head: bigint;
  created_at: Date;
  updated_at: Date;
}

/** Resolves standing and requires `level`: PERMISSION_DENIED when the cube is readable but not enough. */
export async function requireAccess(
  db: RawQuery,
  principal: Principal,
  cubeId: string,
  level: AccessLevel,
  what: string,
): Promise<CubeStanding> {
  const s = await standing(db, principal, cubeId);
  requireLevel(s.access, level, what);
  return s;
}
