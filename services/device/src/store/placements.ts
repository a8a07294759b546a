/**
 * Placement of root sessions on devices, rebinds and run claims.
 *
 * Lock order (every write path, never reversed): the DEVICE row (FOR SHARE: placements and rebinds
 * run side by side, a revoke's FOR UPDATE waits for them and they for it) → the PLACEMENT row
 * (FOR UPDATE, or the unique key of a first insert) → the RUN CLAIM row. A path may skip a
 * prefix (run claims take no device lock) but never takes an earlier lock after a later one.
 */
import { randomUUID } from "node:crypto";
import { NotFoundError } from "@unimatrix/service-kit/errors";
import { inTransaction, StoreAnomalyError } from "@unimatrix/service-kit/store";
import { Prisma } from "../../generated/prisma/client";
import type { DeviceNote } from "../live/notes";
import { canSee, listScope, ownedPlacement, type Scope } from "../rules/access";
import { beginRunOutcome, conflictOutcome, endRunOutcome, type RebindOutcome, rebindOutcome } from "../rules/placement";
import { writeAudit } from "./audit";
import { type Db, DEVICE_COLUMNS, type DeviceRow, type PlacementRow, type Tx } from "./rows";

const DEVICE = Prisma.raw(DEVICE_COLUMNS);
const PLACEMENT =
  Prisma.raw(`p.tenant_id::text, p.root_session_id, p.device_id::text, p.owner_subject_id::text, p.rev, p.placed_at,
  p.updated_at`);

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

/**
 * Places a root session on a device of the caller (first placement only; see PlaceResult).
 *
 * The bound path is ONE statement, so one implicit transaction and one round trip: it takes the
 * device row FOR SHARE (1), inserts the placement row (2: the unique key; a concurrent first
 * placement of the same session waits for the other to commit, then does nothing), and appends
 * the SESSION_PLACED audit row from what was inserted. If the audit insert fails the statement
 * fails and nothing is placed. Only when nothing was inserted is the existing row read (a new
 * statement, which sees the winner's commit) to answer SAME or DEVICE_CONFLICT.
 */
export async function placeSession(
  db: Db,
  scope: Scope,
  rootSessionId: string,
  deviceId: string,
  actorId: string,
  now: Date,
): Promise<PlaceResult> {
  const { tenantId: tenant, ownerSubjectId: owner } = listScope(scope);
  const [row] = await db.$queryRaw<
    (Omit<PlacementRow, "tenant_id" | "owner_subject_id"> & {
      tenant_id: string;
      owner_subject_id: string;
      status: string;
      visible: boolean;
      seq: bigint | null;
    })[]
  >`
    WITH d AS (
      SELECT id, tenant_id, owner_subject_id, status,
        (${tenant}::uuid IS NULL OR tenant_id = ${tenant}::uuid)
          AND (${owner}::uuid IS NULL OR owner_subject_id = ${owner}::uuid) AS visible
      FROM devices WHERE id = ${deviceId}::uuid FOR SHARE
    ), ins AS (
      INSERT INTO placements AS p (tenant_id, root_session_id, device_id, owner_subject_id, rev, placed_at, updated_at)
      SELECT tenant_id, ${rootSessionId}, id, owner_subject_id, 1, ${now}, ${now} FROM d
      WHERE d.visible AND d.status = 'active'
      ON CONFLICT (tenant_id, root_session_id) DO NOTHING
      RETURNING p.root_session_id, p.device_id::text, p.rev, p.placed_at, p.updated_at
    ), aud AS (
      INSERT INTO audit_events (id, tenant_id, owner_subject_id, event_type, device_id, actor_id, root_session_id, detail, at)
      SELECT ${randomUUID()}::uuid, d.tenant_id, d.owner_subject_id, 'session_placed', d.id, ${actorId},
        ins.root_session_id, '{"rev":1}'::jsonb, ${now}
      FROM ins, d
      RETURNING seq
    )
    SELECT d.tenant_id::text, d.owner_subject_id::text, d.status, d.visible, (SELECT seq FROM aud) AS seq,
      ins.root_session_id, ins.device_id, ins.rev, ins.placed_at, ins.updated_at, NULL::text AS active_run_id
    FROM d LEFT JOIN ins ON TRUE`;
  if (!row?.visible) return { outcome: "device_not_found", notes: [] };
  if (row.status !== "active") return { outcome: "device_revoked", notes: [] };
  if (row.seq !== null && row.root_session_id !== null) {
    const placement: PlacementRow = { ...row, active_run_id: null };
    const note: DeviceNote = {
      type: "session_placed",
      tenantId: row.tenant_id,
      cursor: row.seq,
      deviceId,
      rootSessionId,
      rev: 1n,
      at: now,
    };
    return { outcome: "bound", placement, notes: [note] };
  }
  const current = await readPlacement(db, row.tenant_id, rootSessionId);
  if (!current) throw new StoreAnomalyError(`placement ${rootSessionId} conflicted on insert but cannot be read`);
  if (conflictOutcome(current, deviceId) === "same") return { outcome: "same", placement: current, notes: [] };
  return {
    outcome: "device_conflict",
    placement: canSee(scope, ownedPlacement(current)) ? current : null,
    notes: [],
  };
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
  const row = await readPlacement(db, scope.tenantId, rootSessionId);
  if (!row || !canSee(scope, ownedPlacement(row)))
    throw new NotFoundError(`root session ${rootSessionId} is not placed`);
  return row;
}

/** Result of RebindSession. */
export type RebindResult =
  | { outcome: "gone"; notes: DeviceNote[] }
  | {
      outcome: Exclude<RebindOutcome, "gone">;
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
    const tenantId = scope.tenantId;
    // 1. device row, 2. placement row, 3. run claim.
    const device = await lockDevice(tx, deviceId);
    const found = await lockPlacement(tx, tenantId, rootSessionId);
    const locked = found && canSee(scope, ownedPlacement(found)) ? found : undefined;
    const claim = locked ? await lockClaim(tx, tenantId, rootSessionId) : null;
    const outcome = rebindOutcome({ scope, placement: locked, device, claim, deviceId, expectedRev });
    if (!locked || outcome === "gone") return { outcome: "gone", notes: [] };
    const placement: PlacementRow = { ...locked, active_run_id: claim };
    if (outcome !== "rebound") return { outcome, placement, notes: [] };
    const [moved] = await tx.$queryRaw<PlacementRow[]>`
      UPDATE placements AS p SET device_id = ${deviceId}::uuid, rev = rev + 1, updated_at = ${now}
      WHERE tenant_id = ${tenantId}::uuid AND root_session_id = ${rootSessionId}
      RETURNING ${PLACEMENT}, NULL::text AS active_run_id`;
    if (!moved) throw new StoreAnomalyError(`locked placement ${rootSessionId} vanished`);
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

/** Result of BeginRun (O = its outcomes) or EndRun. */
export type RunResult<O extends string> =
  | { outcome: "gone"; notes: DeviceNote[] }
  | { outcome: O; placement: PlacementRow; notes: DeviceNote[] };

/** Result of BeginRun. */
export type BeginResult = RunResult<ReturnType<typeof beginRunOutcome>>;
/** Result of EndRun. */
export type EndResult = RunResult<ReturnType<typeof endRunOutcome>>;

/** Claims a placed root session for a run (placement row → run claim). */
export function beginRun(
  db: Db,
  scope: Scope,
  rootSessionId: string,
  runId: string,
  actorId: string,
  now: Date,
): Promise<BeginResult> {
  return changeRun(db, scope, rootSessionId, actorId, now, async (tx, placement, claim) => {
    const outcome = beginRunOutcome(claim, runId);
    if (outcome !== "begun") return { outcome, placement };
    await tx.$executeRaw`
      INSERT INTO run_claims (tenant_id, root_session_id, run_id, began_at)
      VALUES (${placement.tenant_id}::uuid, ${rootSessionId}, ${runId}, ${now})`;
    return { outcome, placement: { ...placement, active_run_id: runId }, audit: "run_began" };
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
): Promise<EndResult> {
  return changeRun(db, scope, rootSessionId, actorId, now, async (tx, placement, claim) => {
    const outcome = endRunOutcome(claim, runId);
    if (outcome !== "ended") return { outcome, placement };
    await tx.$executeRaw`
      DELETE FROM run_claims WHERE tenant_id = ${placement.tenant_id}::uuid AND root_session_id = ${rootSessionId}`;
    return { outcome, placement: { ...placement, active_run_id: null }, audit: "run_ended" };
  });
}

/** What a run step decided: its outcome, the placement after it, and the audit row if it changed anything. */
type RunStep<O extends string> = (
  tx: Tx,
  placement: PlacementRow,
  claim: string | null,
) => Promise<{ outcome: O; placement: PlacementRow; audit?: "run_began" | "run_ended" }>;

function changeRun<O extends string>(
  db: Db,
  scope: Scope,
  rootSessionId: string,
  actorId: string,
  now: Date,
  step: RunStep<O>,
): Promise<RunResult<O>> {
  return inTransaction(db, async (tx): Promise<RunResult<O>> => {
    const tenantId = scope.tenantId;
    // 2. placement row, 3. run claim (no device lock needed: the device row is not read).
    const locked = await lockPlacement(tx, tenantId, rootSessionId);
    if (!locked || !canSee(scope, ownedPlacement(locked))) return { outcome: "gone", notes: [] };
    const claim = await lockClaim(tx, tenantId, rootSessionId);
    const result = await step(tx, { ...locked, active_run_id: claim }, claim);
    if (!result.audit) return { outcome: result.outcome, placement: result.placement, notes: [] };
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
