/** Rows of `roles`, `drones` and `drone_sessions` as attaching a seat uses them. Row SQL only. */
import { randomUUID } from "node:crypto";
import { FailedPreconditionError, NotFoundError } from "@unimatrix/service-kit/errors";
import { bytes, type PrismaClient, type Tx } from "../store/prisma";
import type { Drone, DroneSession, Role } from "../store/rows";

/** The role a seat attaches as: the named one of the cube, else the cube's default. */
export async function resolveRole(db: PrismaClient | Tx, cubeId: string, roleId: string | undefined): Promise<Role> {
  if (roleId) {
    const role = await db.role.findFirst({ where: { id: roleId, cubeId } });
    if (!role) throw new NotFoundError("role not found");
    return role;
  }
  const role = await db.role.findFirst({ where: { cubeId, isDefault: true } });
  if (!role) throw new FailedPreconditionError("the cube has no default role; name role_id");
  return role;
}

/** A client's drone of a cube locked `FOR UPDATE`, or null. */
export async function lockClientDrone(tx: Tx, cubeId: string, clientId: string, droneId: string) {
  const locked = await tx.$queryRaw<{ id: string }[]>`
    SELECT id::text FROM drones WHERE id = ${droneId}::uuid AND cube_id = ${cubeId}::uuid
      AND client_id = ${clientId}::uuid FOR UPDATE`;
  if (locked.length === 0) return null;
  return tx.drone.findUniqueOrThrow({ where: { id: droneId } });
}

/** A drone of a cube locked `FOR UPDATE`, else NOT_FOUND. */
export async function lockCubeDrone(tx: Tx, cubeId: string, droneId: string): Promise<Drone> {
  const locked = await tx.$queryRaw<{ id: string }[]>`
    SELECT id::text FROM drones WHERE id = ${droneId}::uuid AND cube_id = ${cubeId}::uuid FOR UPDATE`;
  if (locked.length === 0) throw new NotFoundError("drone not found");
  return tx.drone.findUniqueOrThrow({ where: { id: droneId } });
}

/** How many live sessions (unrevoked, unexpired at `now`) a drone has. */
export function liveSessionCount(db: PrismaClient | Tx, droneId: string, now: Date): Promise<number> {
  return db.droneSession.count({ where: { droneId, revokedAt: null, expiresAt: { gt: now } } });
}

/** Re-seats a prior drone: its role, hostname and machine; seen now, its silent-ping state cleared. */
export function reseat(tx: Tx, droneId: string, roleId: string, hostname: string, machineId: string | null, now: Date) {
  return tx.drone.update({
    where: { id: droneId },
    data: { roleId, hostname, lastSeenAt: now, silentPingCount: 0, lastSilentPingAt: null, machineId },
  });
}

/** A new drone of a role, labelled `<role>-<n>` from the role's seat counter (retried past a taken label). */
export async function newDrone(
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

/** Sets the machine a drone's seat runs on. */
export function setDroneMachine(tx: Tx, droneId: string, machineId: string): Promise<Drone> {
  return tx.drone.update({ where: { id: droneId }, data: { machineId } });
}

/** What a new drone session row holds. */
export interface NewSession {
  readonly droneId: string;
  readonly cubeId: string;
  readonly clientId: string;
  readonly tenantId: string;
  readonly lookupDigest: Uint8Array;
  readonly verifierDigest: Uint8Array;
  readonly createdAt: Date;
  readonly expiresAt: Date;
  readonly machineId: string | null;
}

/** Inserts a drone session. */
export function insertSession(tx: Tx, session: NewSession): Promise<DroneSession> {
  return tx.droneSession.create({
    data: {
      ...session,
      id: randomUUID(),
      lookupDigest: bytes(session.lookupDigest),
      verifierDigest: bytes(session.verifierDigest),
    },
  });
}

/** A drone session by its token's lookup digest, or null. */
export function sessionByLookup(db: PrismaClient | Tx, lookupDigest: Uint8Array): Promise<DroneSession | null> {
  return db.droneSession.findUnique({ where: { lookupDigest: bytes(lookupDigest) } });
}

/** A drone by id, or null. */
export function droneById(db: PrismaClient | Tx, droneId: string): Promise<Drone | null> {
  return db.drone.findUnique({ where: { id: droneId } });
}

/** Moves a session to a machine (null: none). */
export async function setSessionMachine(tx: Tx, sessionId: string, machineId: string | null): Promise<void> {
  await tx.droneSession.update({ where: { id: sessionId }, data: { machineId } });
}

/** A drone seen now (attach): its silent-ping state cleared and its machine set. */
export function touchSeat(tx: Tx, droneId: string, machineId: string | null, now: Date): Promise<Drone> {
  return tx.drone.update({
    where: { id: droneId },
    data: { lastSeenAt: now, silentPingCount: 0, lastSilentPingAt: null, machineId },
  });
}

/** Locks a drone row `FOR UPDATE` and reads it. */
export async function lockDroneRow(tx: Tx, droneId: string): Promise<Drone> {
  await tx.$queryRaw`SELECT id FROM drones WHERE id = ${droneId}::uuid FOR UPDATE`;
  return tx.drone.findUniqueOrThrow({ where: { id: droneId } });
}

/** Sets a drone's seat state and note (changed now). */
export function setState(tx: Tx, droneId: string, state: string, note: string, now: Date): Promise<Drone> {
  return tx.drone.update({ where: { id: droneId }, data: { state, stateNote: note, stateChangedAt: now } });
}

/** Evicts a drone (when not evicted yet) and revokes its live sessions; the drone and how many were revoked. */
export async function evict(tx: Tx, drone: Drone, now: Date): Promise<{ drone: Drone; revoked: number }> {
  const updated = drone.evictedAt
    ? drone
    : await tx.drone.update({ where: { id: drone.id }, data: { evictedAt: now } });
  const revoked = await tx.droneSession.updateMany({
    where: { droneId: drone.id, revokedAt: null, expiresAt: { gt: now } },
    data: { revokedAt: now },
  });
  return { drone: updated, revoked: revoked.count };
}

/** Locks a drone session row `FOR UPDATE` and reads the machine it is tied to (null: none). */
export async function lockSessionMachine(tx: Tx, sessionId: string): Promise<string | null> {
  const rows = await tx.$queryRaw<{ machine_id: string | null }[]>`
    SELECT machine_id::text FROM drone_sessions WHERE id = ${sessionId}::uuid FOR UPDATE`;
  const row = rows[0];
  if (!row) throw new Error(`drone session ${sessionId} vanished under its lock`);
  return row.machine_id;
}

/** Sets a drone's machine to `to`, only if it is `from` now (`from` null: whatever it is). */
export async function setDroneMachineIf(
  tx: Tx,
  droneId: string,
  from: string | null,
  to: string | null,
): Promise<void> {
  await tx.$executeRaw`
    UPDATE drones SET machine_id = ${to}::uuid
    WHERE id = ${droneId}::uuid AND (${from}::uuid IS NULL OR machine_id = ${from}::uuid)`;
}
