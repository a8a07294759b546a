import { randomUUID } from "node:crypto";
import { issueToken, type ParsedToken, sha256, verifySecret } from "@unimatrix/service-kit/auth";
import {
  AlreadyExistsError,
  FailedPreconditionError,
  NotFoundError,
  UnauthenticatedError,
} from "@unimatrix/service-kit/errors";
import { inTransaction, StoreAnomalyError } from "@unimatrix/service-kit/store";
import { Prisma } from "../../generated/prisma/client";
import type { DeviceNote } from "../live/notes";
import { canSee, listScope, ownedDevice, type Scope } from "../rules/access";
import { BAD_ENROLL_TOKEN, enrollStep } from "../rules/enroll";
import type { TimeKey } from "../rules/paging";
import { writeAudit } from "./audit";
import { type Db, DEVICE_COLUMNS, type DeviceRow, type EnrollTokenRow, TOKEN_COLUMNS } from "./rows";

const COLUMNS = Prisma.raw(DEVICE_COLUMNS);

/** A validated EnrollDevice. */
export interface EnrollInput {
  readonly token: ParsedToken;
  readonly publicKey: string;
  readonly platform: string;
  readonly displayName: string;
  readonly now: Date;
}

/** The outcome of EnrollDevice. */
export interface Enrolled {
  readonly device: DeviceRow;
  readonly deviceToken: string;
  readonly replayed: boolean;
  readonly notes: DeviceNote[];
}

/**
 * Consumes an enroll token. Lock order: enroll token row, then the device row. A replay with the
 * same public key re-issues the device credential; any other public key is refused.
 */
export function enrollDevice(db: Db, input: EnrollInput): Promise<Enrolled> {
  return inTransaction(db, async (tx) => {
    const [token] = await tx.$queryRaw<(EnrollTokenRow & { verifier_digest: Uint8Array })[]>`
      SELECT ${Prisma.raw(TOKEN_COLUMNS)}, verifier_digest FROM enroll_tokens
      WHERE lookup_digest = ${sha256(input.token.lookup)} FOR UPDATE`;
    if (!token || !verifySecret(input.token.secret, token.verifier_digest)) {
      throw new UnauthenticatedError(BAD_ENROLL_TOKEN);
    }
    const step = enrollStep(token, input.publicKey, input.now);
    const credential = issueToken("device");
    if (step === "replay") {
      const [device] = await tx.$queryRaw<DeviceRow[]>`
        UPDATE devices SET credential_lookup = ${credential.lookupDigest}, credential_verifier = ${credential.verifierDigest},
          rev = rev + 1, updated_at = ${input.now}
        WHERE id = ${token.device_id}::uuid AND status = 'active' RETURNING ${COLUMNS}`;
      if (!device) throw new FailedPreconditionError("the device enrolled with this enroll_token is revoked");
      return { device, deviceToken: credential.token, replayed: true, notes: [] };
    }
    const [device] = await tx.$queryRaw<DeviceRow[]>`
      INSERT INTO devices (id, tenant_id, owner_subject_id, public_key, platform, display_name, enrolled_at, updated_at,
        credential_lookup, credential_verifier, enroll_token_id)
      VALUES (${randomUUID()}::uuid, ${token.tenant_id}::uuid, ${token.owner_subject_id}::uuid, ${input.publicKey},
        ${input.platform}, ${input.displayName}, ${input.now}, ${input.now}, ${credential.lookupDigest},
        ${credential.verifierDigest}, ${token.id}::uuid)
      ON CONFLICT (public_key) DO NOTHING RETURNING ${COLUMNS}`;
    if (!device) throw new AlreadyExistsError("public_key belongs to another device");
    await tx.$executeRaw`
      UPDATE enroll_tokens SET consumed_at = ${input.now}, consumed_by_public_key = ${input.publicKey},
        device_id = ${device.id}::uuid
      WHERE id = ${token.id}::uuid`;
    const cursor = await writeAudit(tx, {
      type: "device_enrolled",
      tenantId: device.tenant_id,
      ownerSubjectId: device.owner_subject_id,
      actorId: device.id,
      deviceId: device.id,
      enrollTokenId: token.id,
      detail: { platform: device.platform },
      at: input.now,
    });
    const note: DeviceNote = {
      type: "device_enrolled",
      tenantId: device.tenant_id,
      cursor,
      deviceId: device.id,
      rev: device.rev,
      at: input.now,
    };
    return { device, deviceToken: credential.token, replayed: false, notes: [note] };
  });
}

/** The device a `umx_device_...` credential belongs to, or null when unknown, wrong or revoked. */
export async function authenticateDevice(db: Db, token: ParsedToken): Promise<DeviceRow | null> {
  const [row] = await db.$queryRaw<(DeviceRow & { credential_verifier: Uint8Array })[]>`
    SELECT ${COLUMNS}, credential_verifier FROM devices WHERE credential_lookup = ${sha256(token.lookup)}`;
  if (!row || !verifySecret(token.secret, row.credential_verifier) || row.status !== "active") return null;
  return row;
}

/** One device in scope, or NOT_FOUND. */
export async function getDevice(db: Db, scope: Scope, id: string): Promise<DeviceRow> {
  const [row] = await db.$queryRaw<DeviceRow[]>`SELECT ${COLUMNS} FROM devices WHERE id = ${id}::uuid`;
  if (!row || !canSee(scope, ownedDevice(row))) throw new NotFoundError(`device ${id} not found`);
  return row;
}

/** Devices in scope, newest first, after a cursor. */
export async function listDevices(
  db: Db,
  scope: Scope,
  status: "active" | "revoked" | null,
  after: TimeKey | null,
  limit: number,
): Promise<DeviceRow[]> {
  const only = listScope(scope);
  const where: Prisma.Sql[] = [Prisma.sql`tenant_id = ${only.tenantId}::uuid`];
  if (only.ownerSubjectId) where.push(Prisma.sql`owner_subject_id = ${only.ownerSubjectId}::uuid`);
  if (only.deviceId) where.push(Prisma.sql`id = ${only.deviceId}::uuid`);
  if (status) where.push(Prisma.sql`status = ${status}`);
  if (after) where.push(Prisma.sql`(enrolled_at, id) < (${after.at}, ${after.id}::uuid)`);
  return db.$queryRaw<DeviceRow[]>`
    SELECT ${COLUMNS} FROM devices WHERE ${Prisma.join(where, " AND ")}
    ORDER BY enrolled_at DESC, id DESC LIMIT ${limit}`;
}

/**
 * Revokes a device: status, reason, the generation bumped (fencing its connection) and the lease
 * dropped, with DEVICE_REVOKED (and CONNECTION_FENCED for a live lease) audited in the same
 * transaction. Lock order: the device row first (placements take it shared, so a placement either
 * committed before the revoke or sees the device revoked). Idempotent: a repeat keeps the first
 * reason and writes nothing.
 */
export function revokeDevice(
  db: Db,
  scope: Scope,
  id: string,
  reason: string,
  actorId: string,
  now: Date,
): Promise<{ device: DeviceRow; notes: DeviceNote[] }> {
  return inTransaction(db, async (tx) => {
    const [row] = await tx.$queryRaw<DeviceRow[]>`SELECT ${COLUMNS} FROM devices WHERE id = ${id}::uuid FOR UPDATE`;
    if (!row || !canSee(scope, ownedDevice(row))) throw new NotFoundError(`device ${id} not found`);
    if (row.status === "revoked") return { device: row, notes: [] };
    const [device] = await tx.$queryRaw<DeviceRow[]>`
      UPDATE devices SET status = 'revoked', revoked_reason = ${reason}, revoked_at = ${now},
        connection_generation = connection_generation + 1, lease_expires_at = NULL, online = false,
        rev = rev + 1, updated_at = ${now}
      WHERE id = ${id}::uuid RETURNING ${COLUMNS}`;
    if (!device) throw new StoreAnomalyError(`locked device ${id} vanished`);
    const base = { tenantId: row.tenant_id, ownerSubjectId: row.owner_subject_id, actorId, deviceId: id, at: now };
    const notes: DeviceNote[] = [];
    if (row.lease_expires_at && row.lease_expires_at.getTime() > now.getTime()) {
      await writeAudit(tx, {
        ...base,
        type: "connection_fenced",
        detail: { generation: row.connection_generation.toString(), reason: "revoked" },
      });
    }
    const cursor = await writeAudit(tx, { ...base, type: "device_revoked", detail: { reason } });
    const note = { tenantId: row.tenant_id, cursor, deviceId: id, generation: device.connection_generation, at: now };
    if (row.online) notes.push({ ...note, type: "device_offline" });
    notes.push({ ...note, type: "device_revoked", rev: device.rev });
    return { device, notes };
  });
}
