import type { Principal } from "@unimatrix/service-kit/auth";
import { NotFoundError } from "@unimatrix/service-kit/errors";
import type { RawQuery } from "@unimatrix/service-kit/store";
import { type AccessLevel, clientOf, MANAGE, requireLevel, tenantOf } from "../rules/access";
import { type AccessView, type AuthCache, accessKey, authTag, type DroneActor, principalTags } from "./auth-cache";
import type { Cube } from "./rows";

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
           c.request_key::text, c.head, c.created_at, c.updated_at, c.retained_floor,
           c.retention_max_age_seconds, c.retention_max_items,
           g.access, d.id::text AS drone_id, d.label AS drone_label, d.evicted_at AS drone_evicted_at,
           r.name AS role_name, r.can_broadcast, r.receives_all_direct, r.human_seat
    FROM cubes c
    LEFT JOIN cube_grants g ON g.cube_id = c.id AND g.client_id = ${clientId}::uuid
    LEFT JOIN drones d ON d.id = ${droneId}::uuid AND d.cube_id = c.id
    LEFT JOIN roles r ON r.id = d.role_id
    WHERE c.id = ${cubeId}::uuid AND c.tenant_id = ${tenantId}::uuid`;
  if (!row) throw new NotFoundError("cube not found");
  const cube = cubeOf(row);
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

/** A cube row of a raw statement as the store's `Cube`. */
function cubeOf(row: CubeRow): Cube {
  return {
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
    retainedFloor: BigInt(row.retained_floor),
    retentionMaxAgeSeconds: row.retention_max_age_seconds,
    retentionMaxItems: row.retention_max_items,
  };
}

/** A tenant's cube by id (one raw statement), or null. */
export async function cubeRow(db: RawQuery, tenantId: string, cubeId: string): Promise<Cube | null> {
  const [row] = await db.$queryRaw<CubeRow[]>`
    SELECT id::text, tenant_id::text, name, directive, taxonomy_json, owner_id::text, owner_kind,
           request_key::text, head, created_at, updated_at, retained_floor,
           retention_max_age_seconds, retention_max_items
    FROM cubes WHERE id = ${cubeId}::uuid AND tenant_id = ${tenantId}::uuid`;
  return row ? cubeOf(row) : null;
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
  retained_floor: bigint;
  retention_max_age_seconds: number | null;
  retention_max_items: number | null;
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

/**
 * A principal's access to a cube from the replica's auth cache (no round trip), or on a miss one
 * `standing` statement, whose cube row is handed back too. Same answers as `standing`: NOT_FOUND
 * for an unknown, foreign or unreadable cube. For reads and the append's pre-checks only: writes
 * that must hold access while they commit re-check inside their transaction.
 */
export async function cachedAccess(
  deps: { fast: RawQuery; auth: AuthCache },
  principal: Principal,
  cubeId: string,
): Promise<{ view: AccessView; cube?: Cube }> {
  let fresh: CubeStanding | undefined;
  const view = (await deps.auth.access.through(accessKey(principal, cubeId), async () => {
    fresh = await standing(deps.fast, principal, cubeId);
    const value: AccessView = {
      access: fresh.access,
      taxonomyJson: fresh.cube.taxonomyJson,
      ...(fresh.drone ? { drone: fresh.drone } : {}),
    };
    return { value, tags: [authTag.cube(cubeId), ...principalTags(principal)] };
  })) as AccessView;
  return fresh ? { view, cube: fresh.cube } : { view };
}

/** `cachedAccess` requiring `level`: PERMISSION_DENIED when the cube is readable but not enough. */
export async function requireCachedAccess(
  deps: { fast: RawQuery; auth: AuthCache },
  principal: Principal,
  cubeId: string,
  level: AccessLevel,
  what: string,
): Promise<{ view: AccessView; cube?: Cube }> {
  const found = await cachedAccess(deps, principal, cubeId);
  requireLevel(found.view.access, level, what);
  return found;
}
