/**
 * Placement of root sessions on devices, rebinds and run claims.
 *
 * Lock order (every write path, never reversed): the DEVICE row (FOR SHARE: placements and rebinds
 * run side by side, a revoke's FOR UPDATE waits for them and they for it) → the PLACEMENT row
 * (FOR UPDATE, or the unique key of a first insert) → the RUN CLAIM row. A path may skip a
 * prefix (run claims take no device lock) but never takes an earlier lock after a later one.
 */
import { FailedPreconditionError, NotFoundError } from "@unimatrix/service-kit";
import { canSee, type Scope } from "../access";
import type { DeviceNote } from "../events";
import { Prisma } from "../generated/prisma/client";
import { writeAudit } from "./audit";
import { type Db, inTransaction, type Tx } from "./db";
import { ownedDevice } from "./devices";
import { DEVICE_COLUMNS, type DeviceRow, type PlacementRow } from "./rows";

const DEVICE = Prisma.raw(DEVICE_COLUMNS);
const PLACEMENT =
  Prisma.raw(`p.tenant_id::text, p.root_session_id, p.device_id::text, p.owner_subject_id::text, p.rev, p.placed_at,
  p.updated_at`);

function ownedPlacement(row: PlacementRow) {
  return { tenantId: row.tenant_id, ownerSubjectId: row.owner_subject_id, deviceId: row.device_id };
}

/**
 * The tenant a root session id is looked up in: the caller's, or for the operator the one tenant
 * that placed it (null when none did; FAILED_PRECONDITION when several did).
 */
async function tenantOf(db: Db | Tx, scope: Scope, rootSessionId: string): Promise<string | null> {
  if (scope.kind !== "all") return scope.tenantId;
  const rows = await db.$queryRaw<{ tenant_id: string }[]>`
    SELECT tenant_id::text FROM placements WHERE root_session_id = ${rootSessionId} LIMIT 2`;
  if (rows.length > 1)
    throw new FailedPreconditionError(`root_session_id ${rootSessionId} is placed in several tenants`);
  return rows[0]?.tenant_id ?? null;
}

async function lockDevice(tx: Tx, deviceId: string): Promise<DeviceRow | undefined> {
  const [row] = await tx.$queryRaw<DeviceRow[]>`SELECT ${DEVICE} FROM devices WHERE id = ${deviceId}::uuid FOR SHARE`;
  return row;
}

async function lockPlacement(tx: Tx, tenantId: string, rootSessionId: string): Promise<PlacementRow | undefined> {
  const [row] = await tx.$queryRaw<PlacementRow[]>`
    SELECT ${PLACEMENT}, NULL::text AS active_run_id FROM placements p
    WHERE p.tenant_id = ${tenantId}::uuid AND p.root_session_id = ${rootSessionId} FOR UPDATE`;
  return row;
}

async function lockClaim(tx: Tx, tenantId: string, rootSessionId: string): Promise<string | null> {
  const [row] = await tx.$queryRaw<{ run_id: string }[]>`
    SELECT run_id FROM run_claims WHERE tenant_id = ${tenantId}::uuid AND root_session_id = ${rootSessionId}
    FOR UPDATE`;
  return row?.run_id ?? null;
}

/** Result of PlaceSession. */
export type PlaceResult =
  | { outcome: "bound" | "same"; placement: PlacementRow; notes: DeviceNote[] }
  | { outcome: "device_conflict"; placement: PlacementRow | null; notes: DeviceNote[] }
  | { outcome: "device_not_found" | "device_revoked"; notes: DeviceNote[] };

/** Places a root session on a device of the caller (first placement only; see PlaceResult). */
export function placeSession(
  db: Db,
  scope: Scope,
  rootSessionId: string,
  deviceId: string,
  actorId: string,
  now: Date,
): Promise<PlaceResult> {
  return inTransaction(db, async (tx): Promise<PlaceResult> => {
    // 1. device row
    const device = await lockDevice(tx, deviceId);
    if (!device || !canSee(scope, ownedDevice(device))) return { outcome: "device_not_found", notes: [] };
    if (device.status !== "active") return { outcome: "device_revoked", notes: [] };
    // 2. placement row: insert, or (when the key exists, after its writer committed) read it.
    const [inserted] = await tx.$queryRaw<PlacementRow[]>`
      INSERT INTO placements AS p (tenant_id, root_session_id, device_id, owner_subject_id, rev, placed_at, updated_at)
      VALUES (${device.tenant_id}::uuid, ${rootSessionId}, ${deviceId}::uuid, ${device.owner_subject_id}::uuid, 1,
        ${now}, ${now})
      ON CONFLICT (tenant_id, root_session_id) DO NOTHING
      RETURNING ${PLACEMENT}, NULL::text AS active_run_id`;
    if (inserted) {
      const cursor = await writeAudit(tx, {
        type: "session_placed",
        tenantId: device.tenant_id,
        ownerSubjectId: device.owner_subject_id,
        actorId,
        deviceId,
        rootSessionId,
        detail: { rev: 1 },
        at: now,
      });
      const note: DeviceNote = {
        type: "session_placed",
        tenantId: device.tenant_id,
        cursor,
        deviceId,
        rootSessionId,
        rev: 1n,
        at: now,
      };
      return { outcome: "bound", placement: inserted, notes: [note] };
    }
    const current = await readPlacement(tx, device.tenant_id, rootSessionId);
    if (!current) throw new Error(`placement ${rootSessionId} conflicted on insert but cannot be read`);
    if (current.device_id === deviceId) return { outcome: "same", placement: current, notes: [] };
    return {
      outcome: "device_conflict",
      placement: canSee(scope, ownedPlacement(current)) ? current : null,
      notes: [],
    };
  });
}

async function readPlacement(db: Db | Tx, tenantId: string, rootSessionId: string): Promise<PlacementRow | undefined> {
  const [row] = await db.$queryRaw<PlacementRow[]>`
    SELECT ${PLACEMENT}, c.run_id AS active_run_id FROM placements p
    LEFT JOIN run_claims c ON c.tenant_id = p.tenant_id AND c.root_session_id = p.root_session_id
    WHERE p.tenant_id = ${tenantId}::uuid AND p.root_session_id = ${rootSessionId}`;
  return row;
}

/** The placement of a root session in scope, or NOT_FOUND. */
export async function getPlacement(db: Db, scope: Scope, rootSessionId: string): Promise<PlacementRow> {
  const tenantId = await tenantOf(db, scope, rootSessionId);
  const row = tenantId ? await readPlacement(db, tenantId, rootSessionId) : undefined;
  if (!row || !canSee(scope, ownedPlacement(row)))
    throw new NotFoundError(`root session ${rootSessionId} is not placed`);
  return row;
}

/** Result of RebindSession. */
export type RebindResult =
  | { outcome: "gone"; notes: DeviceNote[] }
  | {
      outcome: "rebound" | "idempotent" | "rev_conflict" | "active_run" | "device_not_found" | "device_revoked";
      placement: PlacementRow;
      previousDeviceId?: string;
      notes: DeviceNote[];
    };

/**
 * Moves a placed root session to `deviceId` if its rev still equals `expectedRev`. Checks in the
 * contract's order: gone, device not found / revoked, idempotent, rev conflict, active run.
 * The SESSION_REBOUND audit row is written in the same transaction: if it fails, nothing changes.
 */
export function rebindSession(
  db: Db,
  scope: Scope,
  rootSessionId: string,
  deviceId: string,
  expectedRev: bigint,
  actorId: string,
  now: Date,
): Promise<RebindResult> {
  return inTransaction(db, async (tx): Promise<RebindResult> => {
    const tenantId = await tenantOf(tx, scope, rootSessionId);
    if (!tenantId) return { outcome: "gone", notes: [] };
    // 1. device row, 2. placement row, 3. run claim.
    const device = await lockDevice(tx, deviceId);
    const locked = await lockPlacement(tx, tenantId, rootSessionId);
    if (!locked || !canSee(scope, ownedPlacement(locked))) return { outcome: "gone", notes: [] };
    const claim = await lockClaim(tx, tenantId, rootSessionId);
    const placement: PlacementRow = { ...locked, active_run_id: claim };
    const sameOwner =
      device && device.tenant_id === locked.tenant_id && device.owner_subject_id === locked.owner_subject_id;
    if (!device || !sameOwner || !canSee(scope, ownedDevice(device))) {
      return { outcome: "device_not_found", placement, notes: [] };
    }
    if (device.status !== "active") return { outcome: "device_revoked", placement, notes: [] };
    if (locked.device_id === deviceId) return { outcome: "idempotent", placement, notes: [] };
    if (locked.rev !== expectedRev) return { outcome: "rev_conflict", placement, notes: [] };
    if (claim !== null) return { outcome: "active_run", placement, notes: [] };
    const [moved] = await tx.$queryRaw<PlacementRow[]>`
      UPDATE placements AS p SET device_id = ${deviceId}::uuid, rev = rev + 1, updated_at = ${now}
      WHERE tenant_id = ${tenantId}::uuid AND root_session_id = ${rootSessionId}
      RETURNING ${PLACEMENT}, NULL::text AS active_run_id`;
    if (!moved) throw new Error(`locked placement ${rootSessionId} vanished`);
    const cursor = await writeAudit(tx, {
      type: "session_rebound",
      tenantId,
      ownerSubjectId: locked.owner_subject_id,
      actorId,
      deviceId,
      rootSessionId,
      detail: { from: locked.device_id, to: deviceId, rev: moved.rev.toString() },
      at: now,
    });
    const note: DeviceNote = {
      type: "session_rebound",
      tenantId,
      cursor,
      deviceId,
      rootSessionId,
      rev: moved.rev,
      at: now,
    };
    return { outcome: "rebound", placement: moved, previousDeviceId: locked.device_id, notes: [note] };
  });
}

/** Result of BeginRun / EndRun. */
export type RunResult =
  | { outcome: "gone"; notes: DeviceNote[] }
  | {
      outcome: "begun" | "already_active" | "busy" | "ended" | "not_active" | "other_run";
      placement: PlacementRow;
      notes: DeviceNote[];
    };

/** Claims a placed root session for a run (placement row → run claim). */
export function beginRun(
  db: Db,
  scope: Scope,
  rootSessionId: string,
  runId: string,
  actorId: string,
  now: Date,
): Promise<RunResult> {
  return changeRun(db, scope, rootSessionId, actorId, now, async (tx, placement, claim) => {
    if (claim === runId) return { outcome: "already_active", placement, notes: [] };
    if (claim !== null) return { outcome: "busy", placement, notes: [] };
    await tx.$executeRaw`
      INSERT INTO run_claims (tenant_id, root_session_id, run_id, began_at)
      VALUES (${placement.tenant_id}::uuid, ${rootSessionId}, ${runId}, ${now})`;
    return { outcome: "begun", placement: { ...placement, active_run_id: runId }, notes: [], audit: "run_began" };
  });
}

/** Ends a run's claim on a placed root session. */
export function endRun(
  db: Db,
  scope: Scope,
  rootSessionId: string,
  runId: string,
  actorId: string,
  now: Date,
): Promise<RunResult> {
  return changeRun(db, scope, rootSessionId, actorId, now, async (tx, placement, claim) => {
    if (claim === null) return { outcome: "not_active", placement, notes: [] };
    if (claim !== runId) return { outcome: "other_run", placement, notes: [] };
    await tx.$executeRaw`
      DELETE FROM run_claims WHERE tenant_id = ${placement.tenant_id}::uuid AND root_session_id = ${rootSessionId}`;
    return { outcome: "ended", placement: { ...placement, active_run_id: null }, notes: [], audit: "run_ended" };
  });
}

type RunStep = (
  tx: Tx,
  placement: PlacementRow,
  claim: string | null,
) => Promise<RunResult & { audit?: "run_began" | "run_ended" }>;

function changeRun(
  db: Db,
  scope: Scope,
  rootSessionId: string,
  actorId: string,
  now: Date,
  step: RunStep,
): Promise<RunResult> {
  return inTransaction(db, async (tx): Promise<RunResult> => {
    const tenantId = await tenantOf(tx, scope, rootSessionId);
    if (!tenantId) return { outcome: "gone", notes: [] };
    // 2. placement row, 3. run claim (no device lock needed: the device row is not read).
    const locked = await lockPlacement(tx, tenantId, rootSessionId);
    if (!locked || !canSee(scope, ownedPlacement(locked))) return { outcome: "gone", notes: [] };
    const claim = await lockClaim(tx, tenantId, rootSessionId);
    const result = await step(tx, { ...locked, active_run_id: claim }, claim);
    if (!result.audit || result.outcome === "gone") return result;
    const runId = result.placement.active_run_id ?? claim ?? "";
    const cursor = await writeAudit(tx, {
      type: result.audit,
      tenantId,
      ownerSubjectId: locked.owner_subject_id,
      actorId,
      deviceId: locked.device_id,
      rootSessionId,
      detail: { runId },
      at: now,
    });
    const note: DeviceNote = {
      type: result.audit,
      tenantId,
      cursor,
      deviceId: locked.device_id,
      rootSessionId,
      at: now,
    };
    return { outcome: result.outcome, placement: result.placement, notes: [note] };
  });
}
