import { FailedPreconditionError, NotFoundError } from "@unimatrix/service-kit/errors";
import { inTransaction, StoreAnomalyError } from "@unimatrix/service-kit/store";
import { Prisma } from "../../generated/prisma/client";
import type { DeviceNote } from "../live/notes";
import { canSee, ownedDevice, type Scope } from "../rules/access";
import { acquireEffects, holdsLease, leaseExpiry } from "../rules/leases";
import { writeAudit } from "./audit";
import { type Db, DEVICE_COLUMNS, type DeviceRow } from "./rows";

const COLUMNS = Prisma.raw(DEVICE_COLUMNS);

/** A lease just taken. */
export interface Acquired {
  readonly generation: bigint;
  readonly leaseExpiresAt: Date;
  readonly notes: DeviceNote[];
}

/**
 * Takes the device's connection lease: generation + 1 (fencing any holder), a fresh expiry, online.
 * One transaction on the device row; a live lease displaced is audited as CONNECTION_FENCED, an
 * expired one not yet swept as CONNECTION_EXPIRED (so watchers see offline before online).
 */
export function acquireLease(
  db: Db,
  scope: Scope,
  deviceId: string,
  leaseSeconds: number,
  actorId: string,
  now: Date,
): Promise<Acquired> {
  return inTransaction(db, async (tx) => {
    const [row] = await tx.$queryRaw<DeviceRow[]>`
      SELECT ${COLUMNS} FROM devices WHERE id = ${deviceId}::uuid FOR UPDATE`;
    if (!row || !canSee(scope, ownedDevice(row))) throw new NotFoundError(`device ${deviceId} not found`);
    if (row.status !== "active") throw new FailedPreconditionError(`device ${deviceId} is revoked`);
    const expires = leaseExpiry(now, leaseSeconds);
    const effects = acquireEffects(row, now);
    const [updated] = await tx.$queryRaw<{ connection_generation: bigint }[]>`
      UPDATE devices SET connection_generation = connection_generation + 1, lease_expires_at = ${expires},
        online = true, rev = rev + 1, updated_at = ${now}
      WHERE id = ${deviceId}::uuid RETURNING connection_generation`;
    if (!updated) throw new StoreAnomalyError(`locked device ${deviceId} vanished`);
    const generation = updated.connection_generation;
    const base = { tenantId: row.tenant_id, ownerSubjectId: row.owner_subject_id, deviceId, at: now };
    const notes: DeviceNote[] = [];
    const previous = { generation: row.connection_generation.toString() };
    if (effects.fenced) {
      await writeAudit(tx, {
        ...base,
        actorId,
        type: "connection_fenced",
        detail: { ...previous, reason: "acquired" },
      });
    } else if (effects.expired) {
      const cursor = await writeAudit(tx, { ...base, actorId: "", type: "connection_expired", detail: previous });
      notes.push({ ...base, type: "device_offline", cursor, generation: row.connection_generation });
    }
    const cursor = await writeAudit(tx, {
      ...base,
      actorId,
      type: "connection_acquired",
      detail: { generation: generation.toString() },
    });
    if (effects.wentOnline) notes.push({ ...base, type: "device_online", cursor, generation });
    return { generation, leaseExpiresAt: expires, notes };
  });
}

/**
 * Extends the lease of `generation` when it is still the live one: one conditional UPDATE, so a
 * fenced, released, expired or revoked generation changes nothing and answers null.
 */
export async function heartbeatLease(
  db: Db,
  deviceId: string,
  generation: bigint,
  leaseSeconds: number,
  now: Date,
): Promise<Date | null> {
  const expires = leaseExpiry(now, leaseSeconds);
  const rows = await db.$queryRaw<{ lease_expires_at: Date }[]>`
    UPDATE devices SET lease_expires_at = ${expires}, rev = rev + 1, updated_at = ${now}
    WHERE id = ${deviceId}::uuid AND connection_generation = ${generation} AND status = 'active'
      AND lease_expires_at > ${now}
    RETURNING lease_expires_at`;
  return rows[0]?.lease_expires_at ?? null;
}

/** Ends the lease of `generation` if it is the live one; false (nothing changed) otherwise. */
export function releaseLease(
  db: Db,
  deviceId: string,
  generation: bigint,
  actorId: string,
  now: Date,
): Promise<{ ok: boolean; notes: DeviceNote[] }> {
  return inTransaction(db, async (tx) => {
    const [row] = await tx.$queryRaw<DeviceRow[]>`
      SELECT ${COLUMNS} FROM devices WHERE id = ${deviceId}::uuid FOR UPDATE`;
    if (!row || !holdsLease(row, generation, now)) return { ok: false, notes: [] };
    await tx.$executeRaw`
      UPDATE devices SET lease_expires_at = NULL, online = false, rev = rev + 1, updated_at = ${now}
      WHERE id = ${deviceId}::uuid`;
    const base = { tenantId: row.tenant_id, ownerSubjectId: row.owner_subject_id, deviceId, at: now };
    const cursor = await writeAudit(tx, {
      ...base,
      actorId,
      type: "connection_released",
      detail: { generation: generation.toString() },
    });
    return { ok: true, notes: [{ ...base, type: "device_offline", cursor, generation }] };
  });
}

/**
 * Turns devices whose lease expired offline, at most `limit` per call, oldest expiry first. Rows
 * another replica's sweep holds are skipped (SKIP LOCKED), so each expiry is recorded once.
 */
export function sweepExpiredLeases(db: Db, now: Date, limit = 100): Promise<DeviceNote[]> {
  return inTransaction(db, async (tx) => {
    const rows = await tx.$queryRaw<DeviceRow[]>`
      UPDATE devices SET online = false, lease_expires_at = NULL, rev = rev + 1, updated_at = ${now}
      WHERE id IN (
        SELECT id FROM devices WHERE online AND lease_expires_at <= ${now}
        ORDER BY lease_expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
      RETURNING ${COLUMNS}`;
    const notes: DeviceNote[] = [];
    for (const row of rows) {
      const base = { tenantId: row.tenant_id, ownerSubjectId: row.owner_subject_id, deviceId: row.id, at: now };
      const generation = row.connection_generation;
      const cursor = await writeAudit(tx, {
        ...base,
        actorId: "",
        type: "connection_expired",
        detail: { generation: generation.toString() },
      });
      notes.push({ ...base, type: "device_offline", cursor, generation });
    }
    return notes;
  });
}
