import { randomUUID } from "node:crypto";
import { issueToken, type Principal, parseToken, sha256, verifySecret } from "@unimatrix/service-kit/auth";
import { FailedPreconditionError, NotFoundError, PermissionDeniedError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../handlers/deps";
import { ACTIVITY, accessOf, ringAfterCommit } from "../live/channels";
import { authorPrincipalId, isParticipant, MANAGE, READ } from "../rules/access";
import { isSeatChange, type SeatStateName, seatStateMessage } from "../rules/seat";
import { viewerOf, visibleTo } from "../rules/visibility";
import { requireAccess, standing } from "./access";
import { blankEntry, insertEntry } from "./activity";
import { authTag, invalidateAuth } from "./auth-cache";
import { renewHolderClaims } from "./leases";
import { bytes, inTransaction, type PrismaClient, type Tx } from "./prisma";
import {
  type ActivityRow,
  type Drone,
  type DroneRow,
  type DroneSession,
  type ItemRow,
  NO_REACTIONS,
  type Role,
} from "./rows";

/** What AttachSeat asks for. */
export interface AttachRequest {
  readonly cubeId: string;
  readonly roleId?: string;
  readonly sessionToken?: string;
  readonly priorDroneId?: string;
  readonly hostname: string;
  /** The presence machine the session runs on (notices travel over its Link); unset clears it. */
  readonly machineId?: string;
}

/** What AttachSeat answers. */
export type AttachResult =
  | { outcome: "rejected" }
  | { outcome: "created" | "reused"; drone: DroneRow; session: DroneSession; token?: string };

async function resolveRole(tx: Tx, cubeId: string, roleId: string | undefined): Promise<Role> {
  if (roleId) {
    const role = await tx.role.findFirst({ where: { id: roleId, cubeId } });
    if (!role) throw new NotFoundError("role not found");
    return role;
  }
  const role = await tx.role.findFirst({ where: { cubeId, isDefault: true } });
  if (!role) throw new FailedPreconditionError("the cube has no default role; name role_id");
  return role;
}

/** Attaches a seat for a client: reuse a saved session, reattach a prior drone, or create a drone. */
export async function attachSeat(deps: CubeDeps, principal: Principal, request: AttachRequest): Promise<AttachResult> {
  if (principal.kind !== "client") throw new PermissionDeniedError("only clients attach seats");
  const clientId = principal.subjectId;
  const { cubeId } = request;
  await requireAccess(deps.prisma, principal, cubeId, READ, "attaching a seat");
  const role = await resolveRole(deps.prisma, cubeId, request.roleId);
  // Presence answers whether the machine is the caller's (before anything is written).
  if (request.machineId) await deps.machines?.requireOwn(principal, request.machineId);
  const now = deps.clock.now();
  if (request.sessionToken !== undefined) {
    return reuseSession(deps, clientId, cubeId, role, request, now);
  }
  await deps.guard.admit(request.hostname.length + 600);
  const issued = issueToken("drone");
  const expiresAt = new Date(now.getTime() + deps.config.sessionTtlMs);
  const result = await inTransaction(deps.prisma, async (tx) => {
    let drone: Drone;
    if (request.priorDroneId) {
      const locked = await tx.$queryRaw<{ id: string }[]>`
        SELECT id::text FROM drones WHERE id = ${request.priorDroneId}::uuid AND cube_id = ${cubeId}::uuid
          AND client_id = ${clientId}::uuid FOR UPDATE`;
      if (locked.length === 0) throw new NotFoundError("prior drone not found");
      const prior = await tx.drone.findUniqueOrThrow({ where: { id: request.priorDroneId } });
      if (prior.evictedAt) throw new FailedPreconditionError("prior_drone_id was evicted");
      const occupied = await tx.droneSession.count({
        where: { droneId: prior.id, revokedAt: null, expiresAt: { gt: now } },
      });
      if (occupied > 0) throw new FailedPreconditionError("prior_drone_id is occupied by a live session");
      drone = await tx.drone.update({
        where: { id: prior.id },
        data: {
          roleId: role.id,
          hostname: request.hostname,
          lastSeenAt: now,
          silentPingCount: 0,
          lastSilentPingAt: null,
          machineId: request.machineId ?? null,
        },
      });
    } else {
      drone = await newDrone(tx, principal.tenantId, clientId, cubeId, role, request.hostname, now);
      if (request.machineId)
        drone = await tx.drone.update({ where: { id: drone.id }, data: { machineId: request.machineId } });
    }
    const session = await tx.droneSession.create({
      data: {
        id: randomUUID(),
        droneId: drone.id,
        cubeId,
        clientId,
        tenantId: principal.tenantId,
        lookupDigest: bytes(issued.lookupDigest),
        verifierDigest: bytes(issued.verifierDigest),
        createdAt: now,
        expiresAt,
        machineId: request.machineId ?? null,
      },
    });
    await renewHolderClaims(tx, drone.id, now, deps.config.claimLeaseSeconds);
    return { drone, session };
  });
  // A reattached drone may have a new role (what it may broadcast and see).
  if (request.priorDroneId) await invalidateAuth(deps, [authTag.drone(result.drone.id)]);
  const [view] = await droneViews(deps.prisma, [result.drone], now);
  return { outcome: "created", drone: view as DroneRow, session: result.session, token: issued.token };
}

async function newDrone(
  tx: Tx,
  tenantId: string,
  clientId: string,
  cubeId: string,
  role: Role,
  hostname: string,
  now: Date,
): Promise<Drone> {
  for (;;) {
    const [counter] = await tx.$queryRaw<{ seat_counter: number; name: string }[]>`
      UPDATE roles SET seat_counter = seat_counter + 1 WHERE id = ${role.id}::uuid RETURNING seat_counter, name`;
    if (!counter) throw new NotFoundError("role not found");
    const id = randomUUID();
    const label = `${counter.name}-${counter.seat_counter}`;
    const inserted = await tx.$queryRaw<{ id: string }[]>`
      INSERT INTO drones (id, cube_id, tenant_id, role_id, client_id, label, hostname, created_at, last_seen_at)
      VALUES (${id}::uuid, ${cubeId}::uuid, ${tenantId}::uuid, ${role.id}::uuid, ${clientId}::uuid, ${label},
              ${hostname}, ${now}, ${now})
      ON CONFLICT (cube_id, label) DO NOTHING RETURNING id::text`;
    if (inserted.length > 0) return tx.drone.findUniqueOrThrow({ where: { id } });
  }
}

async function reuseSession(
  deps: CubeDeps,
  clientId: string,
  cubeId: string,
  role: Role,
  request: AttachRequest,
  now: Date,
): Promise<AttachResult> {
  const parsed = parseToken(request.sessionToken ?? "");
  if (parsed?.kind !== "drone") return { outcome: "rejected" };
  const session = await deps.prisma.droneSession.findUnique({ where: { lookupDigest: bytes(sha256(parsed.lookup)) } });
  if (!session || !verifySecret(parsed.secret, session.verifierDigest)) return { outcome: "rejected" };
  const drone = await deps.prisma.drone.findUnique({ where: { id: session.droneId } });
  const valid =
    drone !== null &&
    session.clientId === clientId &&
    session.cubeId === cubeId &&
    session.revokedAt === null &&
    session.expiresAt > now &&
    drone.evictedAt === null &&
    drone.roleId === role.id &&
    (request.priorDroneId === undefined || request.priorDroneId === drone.id);
  if (!valid) return { outcome: "rejected" };
  const touched = await inTransaction(deps.prisma, async (tx) => {
    const machineId = request.machineId ?? null;
    if (session.machineId !== machineId)
      await tx.droneSession.update({ where: { id: session.id }, data: { machineId } });
    await renewHolderClaims(tx, drone.id, now, deps.config.claimLeaseSeconds);
    return tx.drone.update({
      where: { id: drone.id },
      data: { lastSeenAt: now, silentPingCount: 0, lastSilentPingAt: null, machineId },
    });
  });
  const [view] = await droneViews(deps.prisma, [touched], now);
  return { outcome: "reused", drone: view as DroneRow, session };
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

/** A cube's drones, oldest first. Requires READ. */
export async function listDrones(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  includeEvicted: boolean,
  offset: number,
  limit: number,
): Promise<DroneRow[]> {
  await requireAccess(deps.prisma, principal, cubeId, READ, "listing drones");
  const drones = await deps.prisma.drone.findMany({
    where: { cubeId, ...(includeEvicted ? {} : { evictedAt: null }) },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    skip: offset,
    take: limit + 1,
  });
  return droneViews(deps.prisma, drones, deps.clock.now());
}

/** Every non-evicted drone with whether it posted after the anchor (ties on the instant by entry id). */
export async function dronesSince(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  anchor: { time: Date } | { entryId: string },
): Promise<{ drones: DroneRow[]; anchorTime: Date }> {
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "listing drones");
  let anchorTime: Date;
  let anchorId: string | null = null;
  if ("entryId" in anchor) {
    const entry = await deps.prisma.activityItem.findFirst({
      where: { id: anchor.entryId, cubeId, itemType: "entry" },
    });
    // An entry the caller cannot see is not found (no createdAt or seen_since oracle), as for ReadThread.
    if (!entry || !visibleTo(viewerOf(s), entry)) throw new NotFoundError("since_entry_id: entry not found");
    anchorTime = entry.createdAt;
    anchorId = entry.id;
  } else {
    anchorTime = anchor.time;
  }
  const seen = await deps.prisma.$queryRaw<{ id: string }[]>`
    SELECT d.id::text FROM drones d
    WHERE d.cube_id = ${cubeId}::uuid AND d.evicted_at IS NULL AND EXISTS (
      SELECT 1 FROM activity_items a
      WHERE a.cube_id = d.cube_id AND a.author_drone_id = d.id AND a.item_type = 'entry'
        AND (a.created_at > ${anchorTime} OR (a.created_at = ${anchorTime} AND a.id > ${anchorId}::uuid)))`;
  const seenIds = new Set(seen.map((r) => r.id));
  const drones = await deps.prisma.drone.findMany({
    where: { cubeId, evictedAt: null },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
  });
  const views = await droneViews(deps.prisma, drones, deps.clock.now());
  return { drones: views.map((v) => ({ ...v, seenSince: seenIds.has(v.drone.id) })), anchorTime };
}

/** Evicts a drone and revokes its sessions. Idempotent. MANAGE, or the drone's own client. */
export async function evictDrone(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  droneId: string,
): Promise<{ drone: DroneRow; revoked: number }> {
  const s = await standing(deps.prisma, principal, cubeId);
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    const locked = await tx.$queryRaw<{ id: string }[]>`
      SELECT id::text FROM drones WHERE id = ${droneId}::uuid AND cube_id = ${cubeId}::uuid FOR UPDATE`;
    if (locked.length === 0) throw new NotFoundError("drone not found");
    const drone = await tx.drone.findUniqueOrThrow({ where: { id: droneId } });
    const ownClient = principal.kind === "client" && principal.subjectId === drone.clientId;
    if (s.access < MANAGE && !ownClient)
      throw new PermissionDeniedError("evicting requires manage access or being the drone's client");
    const updated = drone.evictedAt
      ? drone
      : await tx.drone.update({ where: { id: droneId }, data: { evictedAt: now } });
    const revoked = await tx.droneSession.updateMany({
      where: { droneId, revokedAt: null, expiresAt: { gt: now } },
      data: { revokedAt: now },
    });
    return { drone: updated, revoked: revoked.count };
  });
  await invalidateAuth(deps, [authTag.drone(droneId)]);
  await ringAfterCommit(deps, [cubeId], accessOf([droneId]));
  const [view] = await droneViews(deps.prisma, [result.drone], now);
  return { drone: view as DroneRow, revoked: result.revoked };
}

/** What SetSeatState did: the drone after it, and the appended entry when it changed. */
export interface SeatStateResult {
  readonly drone: DroneRow;
  readonly entry: ItemRow | null;
}

/**
 * Sets the calling drone's seat state and note. Only drone sessions (FAILED_PRECONDITION
 * otherwise), in their own cube, at any posture (it is the drone's own seat, so observers and
 * roles that cannot broadcast may too). Under the drone's row lock: the same state and note again
 * changes nothing; a change updates the drone and appends one BROADCAST entry carrying it (no reply
 * expected), in one transaction.
 */
export async function setSeatState(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  state: SeatStateName,
  note: string,
): Promise<SeatStateResult> {
  if (principal.kind !== "drone-session") throw new FailedPreconditionError("only drone sessions have a seat state");
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "setting the seat state");
  const droneId = principal.droneId;
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    await tx.$queryRaw`SELECT id FROM drones WHERE id = ${droneId}::uuid FOR UPDATE`;
    const current = await tx.drone.findUniqueOrThrow({ where: { id: droneId } });
    if (!isSeatChange({ state: current.state, note: current.stateNote }, { state, note }))
      return { drone: current, entry: null };
    await deps.guard.admit(Buffer.byteLength(note) + 300);
    const drone = await tx.drone.update({
      where: { id: droneId },
      data: { state, stateNote: note, stateChangedAt: now },
    });
    const row: ActivityRow = {
      ...blankEntry(),
      id: randomUUID(),
      cubeId,
      createdAt: now,
      authorDroneId: droneId,
      authorPrincipalId: authorPrincipalId(principal),
      authorPrincipalKind: principal.kind,
      authorLabel: s.drone?.label ?? current.label,
      message: seatStateMessage(state, note),
      visibility: "broadcast",
      expectsReply: false,
      seatState: state,
      seatStateNote: note,
    };
    row.position = await insertEntry(tx, row, [], deps.config.claimLeaseSeconds);
    return { drone, entry: { row, state: NO_REACTIONS } as ItemRow };
  });
  if (result.entry) await ringAfterCommit(deps, [cubeId], ACTIVITY);
  const [view] = await droneViews(deps.prisma, [result.drone], now);
  return { drone: view as DroneRow, entry: result.entry };
}
