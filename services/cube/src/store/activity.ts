import { randomUUID } from "node:crypto";
import { FailedPreconditionError, InvalidArgumentError, PermissionDeniedError } from "@unimatrix/service-kit";
import type { Principal } from "@unimatrix/service-kit/auth";
import { StoreAnomalyError } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../handlers/deps";
import { ACTIVITY, ringAfterCommit } from "../live/channels";
import { authorPrincipalId, READ, WRITE } from "../rules/access";
import { cursorPosition } from "../rules/cursor";
import type { NewEntry } from "../rules/entry";
import { taxonomyKinds } from "../rules/taxonomy";
import { type Viewer, viewerOf, visibleTo } from "../rules/visibility";
import { type CubeStanding, requireAccess } from "./access";
import { distinctMachines, ringNotices } from "./notices";
import { inTransaction, type PrismaClient, type Tx } from "./prisma";
import { type ActivityRow, type EntryState, type ItemRow, NO_REACTIONS } from "./rows";

/** Display label of a principal: the drone label, user name or client name. */
export async function labelOf(db: Tx, principal: Principal, s: CubeStanding): Promise<string> {
  if (s.drone) return s.drone.label;
  if (principal.kind === "user")
    return (await db.user.findUnique({ where: { id: principal.subjectId } }))?.displayName ?? "";
  if (principal.kind === "client")
    return (await db.apiClient.findUnique({ where: { id: principal.subjectId } }))?.name ?? "";
  return "";
}

/** Rows with the ack and claim state of their entries, loaded in one batch. */
export async function loadItems(db: PrismaClient | Tx, rows: readonly ActivityRow[]): Promise<ItemRow[]> {
  const entryIds = rows.filter((r) => r.itemType === "entry").map((r) => r.id);
  if (entryIds.length === 0) return rows.map((row) => ({ row, state: NO_REACTIONS }));
  const [acks, claims] = await Promise.all([
    db.ack.findMany({ where: { entryId: { in: entryIds } }, orderBy: [{ createdAt: "asc" }, { principalId: "asc" }] }),
    db.claim.findMany({ where: { entryId: { in: entryIds } } }),
  ]);
  return rows.map((row): ItemRow => {
    if (row.itemType !== "entry") return { row, state: NO_REACTIONS };
    const mine = acks.filter((a) => a.entryId === row.id);
    const state: EntryState = {
      ackCount: mine.length,
      ackedByDroneIds: mine.flatMap((a) => (a.droneId ? [a.droneId] : [])),
      claim: claims.find((c) => c.entryId === row.id) ?? null,
    };
    return { row, state };
  });
}

/** Appends an entry: position taken under the cube lock, committed, then the doorbell rings. */
export async function appendEntry(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  input: NewEntry,
): Promise<ItemRow> {
  const pre = await requireAccess(deps.fast, principal, cubeId, WRITE, "posting");
  if (input.visibility === "broadcast" && pre.drone && !pre.drone.canBroadcast)
    throw new PermissionDeniedError("this drone's role cannot broadcast");
  if (input.kind !== undefined && pre.cube.taxonomyJson && !taxonomyKinds(pre.cube.taxonomyJson).has(input.kind))
    throw new InvalidArgumentError("kind", "is not one of the cube's taxonomy kinds");
  await deps.guard.admit(Buffer.byteLength(input.message) + input.recipientDroneIds.length * 16 + 200);
  const now = deps.clock.now();
  const label = await labelOf(deps.prisma, principal, pre);
  if (input.recipientDroneIds.length > 0) {
    const live = await deps.prisma.drone.count({
      where: { id: { in: input.recipientDroneIds }, cubeId, evictedAt: null },
    });
    if (live !== input.recipientDroneIds.length)
      throw new InvalidArgumentError("recipient_drone_ids", "every recipient must be a live drone of this cube");
  }
  const row: ActivityRow = {
    id: randomUUID(),
    cubeId,
    position: 0n,
    itemType: "entry",
    createdAt: now,
    authorDroneId: pre.drone?.id ?? null,
    authorPrincipalId: authorPrincipalId(principal),
    authorPrincipalKind: principal.kind,
    authorLabel: label,
    message: input.message,
    visibility: input.visibility,
    recipientDroneIds: input.recipientDroneIds,
    kind: input.kind ?? null,
    notificationKind: null,
    entryId: null,
    actorDroneId: null,
    actorRoleName: null,
  };
  // One statement, so one implicit transaction and one round trip: touch the author drone first
  // (the position CTE depends on it, so the drone lock is taken before the cube lock), take the
  // next position under the cube row lock, insert. Commit order is therefore position order.
  // A DIRECT entry also queues a notice per recipient whose live session runs on a machine, in the
  // same statement (so the same transaction; see store/notices.ts).
  const [inserted] = await deps.fast.$queryRaw<
    { position: bigint | string; queued: { tenant_id: string; machine_id: string }[] | null }[]
  >`
    WITH touch AS (
      UPDATE drones SET last_seen_at = ${now}, last_log_post_at = ${now}, silent_ping_count = 0,
                        last_silent_ping_at = NULL
      WHERE id = ${row.authorDroneId}::uuid RETURNING id
    ), pos AS (
      UPDATE cubes SET head = head + 1 WHERE id = ${cubeId}::uuid AND (SELECT count(*) FROM touch) >= 0
      RETURNING head
    ), ins AS (
    INSERT INTO activity_items (id, cube_id, position, item_type, created_at, author_drone_id, author_principal_id,
                                author_principal_kind, author_label, message, visibility, recipient_drone_ids, kind)
    SELECT ${row.id}::uuid, ${cubeId}::uuid, pos.head, 'entry', ${now}, ${row.authorDroneId}::uuid,
           ${row.authorPrincipalId}, ${row.authorPrincipalKind}, ${label}, ${input.message}, ${input.visibility},
           ${input.recipientDroneIds}::uuid[], ${row.kind}
    FROM pos
    RETURNING position
    ), queued AS (
      INSERT INTO notices (id, tenant_id, machine_id, cube_id, drone_id, item_id, entry_id, created_at)
      SELECT gen_random_uuid(), s.tenant_id, s.machine_id, ${cubeId}::uuid, s.drone_id, ${row.id}::uuid,
             ${row.id}::uuid, ${now}
      FROM ins CROSS JOIN LATERAL (
        SELECT DISTINCT ON (ds.drone_id) ds.drone_id, ds.tenant_id, ds.machine_id FROM drone_sessions ds
        WHERE ${input.visibility}::text = 'direct' AND ds.drone_id = ANY(${input.recipientDroneIds}::uuid[])
          AND ds.revoked_at IS NULL AND ds.expires_at > ${now} AND ds.machine_id IS NOT NULL
        ORDER BY ds.drone_id, ds.created_at DESC) s
      ON CONFLICT (item_id, drone_id) DO NOTHING
      RETURNING tenant_id::text, machine_id::text
    )
    SELECT ins.position,
           (SELECT json_agg(json_build_object('tenant_id', q.tenant_id, 'machine_id', q.machine_id)) FROM queued q)
             AS queued
    FROM ins`;
  if (!inserted) throw new StoreAnomalyError(`cube ${cubeId} vanished while appending`);
  row.position = BigInt(inserted.position);
  await ringAfterCommit(deps, [cubeId], ACTIVITY);
  await ringNotices(deps, distinctMachines(inserted.queued ?? []));
  return { row, state: NO_REACTIONS };
}

/** Items of a cube after a position, in order (every item: visibility is the reader's to apply). */
export function readAfter(db: PrismaClient | Tx, cubeId: string, after: bigint, limit: number): Promise<ActivityRow[]> {
  return db.activityItem.findMany({
    where: { cubeId, position: { gt: after } },
    orderBy: { position: "asc" },
    take: limit,
  });
}

/** A cube's last position (0 for an unknown cube). */
export async function headOf(db: PrismaClient | Tx, cubeId: string): Promise<bigint> {
  const cube = await db.cube.findUnique({ where: { id: cubeId }, select: { head: true } });
  return BigInt(cube?.head ?? 0n);
}

/** Visible items after a position: what was found, the last position scanned, and whether the log goes on. */
export interface VisiblePage {
  readonly rows: ActivityRow[];
  readonly last: bigint;
  readonly hasMore: boolean;
}

/** Visible items after a position, scanning in batches until `limit` are found or the log ends. */
export async function scanVisible(
  db: PrismaClient | Tx,
  cubeId: string,
  after: bigint,
  viewer: Viewer,
  limit: number,
): Promise<VisiblePage> {
  const rows: ActivityRow[] = [];
  let last = after;
  for (let round = 0; round < 8; round++) {
    const batch = await readAfter(db, cubeId, last, 500);
    for (const row of batch) {
      if (visibleTo(viewer, row)) {
        rows.push(row);
        if (rows.length === limit) {
          return { rows, last: row.position, hasMore: true };
        }
      }
      last = row.position;
    }
    if (batch.length < 500) return { rows, last, hasMore: false };
  }
  return { rows, last, hasMore: true };
}

/** The position a cursor names in the standing's cube (nothing is pruned yet: the floor is 0). */
export function positionOf(field: string, s: CubeStanding, cursor: string): bigint {
  return cursorPosition(field, s.cube.id, { head: BigInt(s.cube.head), floor: 0n }, cursor);
}

/** A page of items with the position read from and the last position scanned. */
export interface ItemPage {
  readonly items: ItemRow[];
  readonly after: bigint;
  readonly last: bigint;
  readonly hasMore: boolean;
}

/** A page of visible activity after a cursor. Requires READ. */
export async function readActivity(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  cursor: string,
  limit: number,
): Promise<ItemPage> {
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "reading");
  const after = positionOf("cursor", s, cursor);
  const page = await scanVisible(deps.prisma, cubeId, after, viewerOf(s), limit);
  return { items: await loadItems(deps.prisma, page.rows), after, last: page.last, hasMore: page.hasMore };
}

/** What a drone may see since its inbox position; advances the position. */
export async function readUnread(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  limit: number,
): Promise<ItemPage> {
  if (principal.kind !== "drone-session") {
    throw new FailedPreconditionError("only drone sessions have an inbox");
  }
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "reading");
  return inTransaction(deps.prisma, async (tx) => {
    const [drone] = await tx.$queryRaw<{ inbox_position: bigint }[]>`
      SELECT inbox_position FROM drones WHERE id = ${principal.droneId}::uuid FOR UPDATE`;
    const after = BigInt(drone?.inbox_position ?? 0);
    const page = await scanVisible(tx, cubeId, after, viewerOf(s), limit);
    if (page.last !== after) {
      await tx.drone.update({ where: { id: principal.droneId }, data: { inboxPosition: page.last } });
    }
    return { items: await loadItems(tx, page.rows), after, last: page.last, hasMore: page.hasMore };
  });
}
