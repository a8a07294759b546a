/** Rows of `drones` (with their role, client and grant where a question needs them). Row SQL only. */
import type { RawQuery } from "@unimatrix/service-kit/store";
import { isParticipant, WRITE } from "../rules/access";
import type { Viewer } from "../rules/visibility";
import type { PrismaClient, Tx } from "../store/prisma";
import type { ActivityRow, Drone, DroneRow } from "../store/rows";

/** Viewers of the given drones of a cube (evicted drones are left out: they see nothing). */
export async function droneViewers(db: RawQuery, cubeId: string, droneIds: readonly string[]) {
  if (droneIds.length === 0) return [];
  const rows = await db.$queryRaw<{ id: string; participant: boolean; all_direct: boolean }[]>`
    SELECT d.id::text, (c.revoked_at IS NULL AND COALESCE(g.access, 0) >= ${WRITE}) AS participant,
           r.receives_all_direct AS all_direct
    FROM drones d
    JOIN roles r ON r.id = d.role_id
    JOIN clients c ON c.id = d.client_id
    LEFT JOIN cube_grants g ON g.client_id = d.client_id AND g.cube_id = d.cube_id
    WHERE d.cube_id = ${cubeId}::uuid AND d.id = ANY(${[...droneIds]}::uuid[]) AND d.evicted_at IS NULL`;
  return rows.map((r): Viewer & { kind: "drone" } => ({
    kind: "drone",
    droneId: r.id,
    participant: r.participant,
    allDirect: r.all_direct,
  }));
}

/** The claim audience: the direct recipients, or for a broadcast every participant drone; minus `except`. */
export async function claimAudience(tx: Tx, entry: ActivityRow, except: string | undefined): Promise<string[]> {
  let ids: string[];
  if (entry.visibility === "direct") {
    // Evicted recipients are out of the audience.
    const live = await tx.drone.findMany({
      where: { id: { in: entry.recipientDroneIds }, evictedAt: null },
      select: { id: true },
    });
    const liveIds = new Set(live.map((d) => d.id));
    ids = entry.recipientDroneIds.filter((id) => liveIds.has(id));
  } else {
    const rows = await tx.$queryRaw<{ id: string }[]>`
      SELECT d.id::text FROM drones d
      JOIN clients c ON c.id = d.client_id AND c.revoked_at IS NULL
      JOIN cube_grants g ON g.client_id = d.client_id AND g.cube_id = d.cube_id AND g.access >= 2
      WHERE d.cube_id = ${entry.cubeId}::uuid AND d.evicted_at IS NULL
      ORDER BY d.created_at, d.id`;
    ids = rows.map((r) => r.id);
  }
  return ids.filter((id) => id !== except);
}

/** Thresholds of the silent-drone ping. */
const SILENT_MS = 10 * 60_000;
/** How long after a ping a drone may be pinged again. */
const COOLDOWN_MS = 10 * 60_000;
/** The most pings a silent drone gets. */
const MAX_PINGS = 3;
/** The most drones one round pings. */
const SCAN_LIMIT = 25;

/**
 * Stamps up to 25 silent participant drones with a live session (oldest first) as pinged: picked
 * `FOR UPDATE SKIP LOCKED` and bumped in one statement. Replicas scanning together skip each
 * other's rows, and a committed bump moves a drone out of the window. Returns the drones stamped.
 */
export async function stampSilentDrones(db: RawQuery, now: Date) {
  const silentBefore = new Date(now.getTime() - SILENT_MS);
  const cooldownBefore = new Date(now.getTime() - COOLDOWN_MS);
  return db.$queryRaw<{ id: string; cube_id: string }[]>`
    WITH picked AS (
      SELECT d.id FROM drones d
      JOIN clients c ON c.id = d.client_id AND c.revoked_at IS NULL
      JOIN cube_grants g ON g.client_id = d.client_id AND g.cube_id = d.cube_id AND g.access >= 2
      WHERE d.evicted_at IS NULL
        AND d.last_seen_at <= ${silentBefore}
        AND d.silent_ping_count < ${MAX_PINGS}
        AND (d.last_silent_ping_at IS NULL OR d.last_silent_ping_at <= ${cooldownBefore})
        AND EXISTS (SELECT 1 FROM drone_sessions s
                    WHERE s.drone_id = d.id AND s.revoked_at IS NULL AND s.expires_at > ${now})
      ORDER BY d.last_seen_at, d.id
      LIMIT ${SCAN_LIMIT}
      FOR UPDATE OF d SKIP LOCKED
    )
    UPDATE drones SET silent_ping_count = silent_ping_count + 1, last_silent_ping_at = ${now}
    FROM picked WHERE drones.id = picked.id
    RETURNING drones.id::text, drones.cube_id::text`;
}

/** Adds role name, posture and liveness to drone rows (batched). */
export async function droneViews(prisma: PrismaClient | Tx, drones: Drone[], now: Date): Promise<DroneRow[]> {
  if (drones.length === 0) return [];
  const roleIds = [...new Set(drones.map((d) => d.roleId))];
  const clientIds = [...new Set(drones.map((d) => d.clientId))];
  const cubeIds = [...new Set(drones.map((d) => d.cubeId))];
  const [roles, clients, grants, live] = await Promise.all([
    prisma.role.findMany({ where: { id: { in: roleIds } }, select: { id: true, name: true } }),
    prisma.apiClient.findMany({ where: { id: { in: clientIds } }, select: { id: true, revokedAt: true } }),
    prisma.cubeGrant.findMany({ where: { clientId: { in: clientIds }, cubeId: { in: cubeIds } } }),
    prisma.droneSession.findMany({
      where: { droneId: { in: drones.map((d) => d.id) }, revokedAt: null, expiresAt: { gt: now } },
      select: { droneId: true },
    }),
  ]);
  const roleName = new Map(roles.map((r) => [r.id, r.name]));
  const revoked = new Map(clients.map((c) => [c.id, c.revokedAt !== null]));
  const access = new Map(grants.map((g) => [`${g.clientId}/${g.cubeId}`, g.access]));
  const liveIds = new Set(live.map((s) => s.droneId));
  return drones.map((drone) => ({
    drone,
    roleName: roleName.get(drone.roleId) ?? "",
    participant: isParticipant({
      evicted: drone.evictedAt !== null,
      clientRevoked: revoked.get(drone.clientId) !== false,
      access: access.get(`${drone.clientId}/${drone.cubeId}`) ?? 0,
    }),
    live: drone.evictedAt === null && liveIds.has(drone.id),
  }));
}

/** One drone's view (see droneViews). */
export async function droneView(prisma: PrismaClient | Tx, drone: Drone, now: Date): Promise<DroneRow> {
  const [view] = await droneViews(prisma, [drone], now);
  return view as DroneRow;
}

/** Locks a drone's row `FOR UPDATE` and reads its inbox position (0 when unknown). */
export async function lockInbox(tx: RawQuery, droneId: string): Promise<bigint> {
  const [drone] = await tx.$queryRaw<{ inbox_position: bigint }[]>`
    SELECT inbox_position FROM drones WHERE id = ${droneId}::uuid FOR UPDATE`;
  return BigInt(drone?.inbox_position ?? 0);
}

/** A drone's inbox position as it stands, without a lock (0 when unknown). */
export async function inboxOf(db: RawQuery, droneId: string): Promise<bigint> {
  const [drone] = await db.$queryRaw<{ inbox_position: bigint | string }[]>`
    SELECT inbox_position FROM drones WHERE id = ${droneId}::uuid`;
  return BigInt(drone?.inbox_position ?? 0);
}

/**
 * Moves a drone's inbox position from `from` to `to`, unless another read moved it since `from`
 * was read (then nothing changes and the answer is false).
 */
export async function moveInbox(db: RawQuery, droneId: string, from: bigint, to: bigint): Promise<boolean> {
  const moved = await db.$queryRaw<unknown[]>`
    UPDATE drones SET inbox_position = ${String(to)}::bigint
    WHERE id = ${droneId}::uuid AND inbox_position = ${String(from)}::bigint RETURNING 1`;
  return moved.length === 1;
}

/** Moves a drone's inbox position. */
export async function advanceInbox(tx: Tx, droneId: string, position: bigint): Promise<void> {
  await tx.drone.update({ where: { id: droneId }, data: { inboxPosition: position } });
}
