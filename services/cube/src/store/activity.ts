import { randomUUID } from "node:crypto";
import {
  FailedPreconditionError,
  InvalidArgumentError,
  PermissionDeniedError,
  type Principal,
} from "@unimatrix/service-kit";
import type { ActivityItem as ActivityRow } from "../../generated/prisma/client";
import { type EntryExtras, entryToWire, notificationToWire, type WireItem } from "../convert";
import { decodeCursor, encodeCursor } from "../cursor";
import { ACTIVITY, type CubeDeps, ring } from "../deps";
import { taxonomyKinds } from "../validate";
import { type CubeStanding, READ, requireAccess, WRITE } from "./access";
import { inTransaction, type PrismaClient, type Tx } from "./prisma";

/** Who is reading: a drone (with what decides its visibility) or another principal. */
export type Viewer =
  | { readonly kind: "drone"; readonly droneId: string; readonly participant: boolean; readonly allDirect: boolean }
  | { readonly kind: "principal" };

/** The viewer a standing describes. */
export function viewerOf(s: CubeStanding): Viewer {
  if (!s.drone) return { kind: "principal" };
  return { kind: "drone", droneId: s.drone.id, participant: s.access >= WRITE, allDirect: s.drone.receivesAllDirect };
}

/**
 * Whether a viewer may see an item: observers see broadcast entries only; participants also their
 * own, addressed and (receives-all-direct) direct entries and their notifications; other principals
 * every entry and no notification.
 */
export function visibleTo(viewer: Viewer, row: ActivityRow): boolean {
  if (row.itemType === "notification") return viewer.kind === "drone" && row.recipientDroneIds[0] === viewer.droneId;
  if (row.visibility === "broadcast" || viewer.kind === "principal") return true;
  if (!viewer.participant) return false;
  return viewer.allDirect || row.authorDroneId === viewer.droneId || row.recipientDroneIds.includes(viewer.droneId);
}

/** The key that makes acks and claims idempotent per principal: the drone for drone sessions. */
export function actorKey(principal: Principal): string {
  return principal.kind === "drone-session" ? principal.droneId : principal.subjectId;
}

/** Display label of a principal: the drone label, user name or client name. */
export async function labelOf(db: Tx, principal: Principal, s: CubeStanding): Promise<string> {
  if (s.drone) return s.drone.label;
  if (principal.kind === "user")
    return (await db.user.findUnique({ where: { id: principal.subjectId } }))?.displayName ?? "";
  if (principal.kind === "client")
    return (await db.apiClient.findUnique({ where: { id: principal.subjectId } }))?.name ?? "";
  return "";
}

/** Ack and claim state of entries, batched. */
export async function extrasFor(db: PrismaClient | Tx, entryIds: string[]): Promise<Map<string, EntryExtras>> {
  const out = new Map<string, EntryExtras>();
  if (entryIds.length === 0) return out;
  const [acks, claims] = await Promise.all([
    db.ack.findMany({ where: { entryId: { in: entryIds } }, orderBy: [{ createdAt: "asc" }, { principalId: "asc" }] }),
    db.claim.findMany({ where: { entryId: { in: entryIds } } }),
  ]);
  for (const id of entryIds) {
    const mine = acks.filter((a) => a.entryId === id);
    const claim = claims.find((c) => c.entryId === id);
    out.set(id, {
      ackCount: mine.length,
      ackedByDroneIds: mine.flatMap((a) => (a.droneId ? [a.droneId] : [])),
      claim,
    });
  }
  return out;
}

/** Rows → wire items, with entry extras loaded in one batch. */
export async function toItems(db: PrismaClient | Tx, rows: ActivityRow[]): Promise<WireItem[]> {
  const extras = await extrasFor(
    db,
    rows.filter((r) => r.itemType === "entry").map((r) => r.id),
  );
  return rows.map((row) =>
    row.itemType === "entry"
      ? { item: { case: "entry", value: entryToWire(row, extras.get(row.id) ?? { ackCount: 0, ackedByDroneIds: [] }) } }
      : { item: { case: "notification", value: notificationToWire(row) } },
  );
}

/** Takes `count` positions of a cube's order; locks the cube row until commit (commit order = position order). */
export async function takePositions(tx: Tx, cubeId: string, count: number): Promise<bigint> {
  const [row] = await tx.$queryRaw<{ head: bigint }[]>`
    UPDATE cubes SET head = head + ${count} WHERE id = ${cubeId}::uuid RETURNING head`;
  if (!row) throw new Error(`cube ${cubeId} vanished under a held transaction`);
  return BigInt(row.head) - BigInt(count) + 1n;
}

/** A notification to store. */
export interface NewNotification {
  readonly recipientDroneId: string;
  readonly kind: "ack" | "claim" | "release" | "heartbeat_ping";
  readonly text: string;
  readonly entryId?: string;
  readonly actorDroneId?: string;
  readonly actorRoleName?: string;
}

/** Stores notifications in the cube's order (inside the caller's transaction). */
export async function insertNotifications(tx: Tx, cubeId: string, items: NewNotification[], now: Date): Promise<void> {
  if (items.length === 0) return;
  const first = await takePositions(tx, cubeId, items.length);
  await tx.activityItem.createMany({
    data: items.map((n, i) => ({
      id: randomUUID(),
      cubeId,
      position: first + BigInt(i),
      itemType: "notification",
      createdAt: now,
      message: n.text,
      recipientDroneIds: [n.recipientDroneId],
      notificationKind: n.kind,
      entryId: n.entryId ?? null,
      actorDroneId: n.actorDroneId ?? null,
      actorRoleName: n.actorRoleName ?? null,
    })),
  });
}

/** What AppendEntry asks for (validated shape). */
export interface NewEntry {
  readonly message: string;
  readonly visibility: "broadcast" | "direct";
  readonly recipientDroneIds: string[];
  readonly kind?: string;
}

/** Appends an entry: position taken under the cube lock, committed, then the doorbell rings. */
export async function appendEntry(deps: CubeDeps, principal: Principal, cubeId: string, input: NewEntry) {
  const pre = await requireAccess(deps.prisma, principal, cubeId, WRITE, "posting");
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
    authorPrincipalId: principal.kind === "drone-session" ? principal.clientId : principal.subjectId,
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
  const [inserted] = await deps.prisma.$queryRaw<{ position: bigint }[]>`
    WITH touch AS (
      UPDATE drones SET last_seen_at = ${now}, last_log_post_at = ${now}, silent_ping_count = 0,
                        last_silent_ping_at = NULL
      WHERE id = ${row.authorDroneId}::uuid RETURNING id
    ), pos AS (
      UPDATE cubes SET head = head + 1 WHERE id = ${cubeId}::uuid AND (SELECT count(*) FROM touch) >= 0
      RETURNING head
    )
    INSERT INTO activity_items (id, cube_id, position, item_type, created_at, author_drone_id, author_principal_id,
                                author_principal_kind, author_label, message, visibility, recipient_drone_ids, kind)
    SELECT ${row.id}::uuid, ${cubeId}::uuid, pos.head, 'entry', ${now}, ${row.authorDroneId}::uuid,
           ${row.authorPrincipalId}, ${row.authorPrincipalKind}, ${label}, ${input.message}, ${input.visibility},
           ${input.recipientDroneIds}::uuid[], ${row.kind}
    FROM pos
    RETURNING position`;
  if (!inserted) throw new Error(`cube ${cubeId} vanished while appending`);
  row.position = BigInt(inserted.position);
  ring(deps, [cubeId], ACTIVITY);
  return entryToWire(row, { ackCount: 0, ackedByDroneIds: [] });
}

/** Visible items after a position, scanning in batches until `limit` are found or the log ends. */
export async function scanVisible(
  db: PrismaClient | Tx,
  cubeId: string,
  after: bigint,
  viewer: Viewer,
  limit: number,
): Promise<{ rows: ActivityRow[]; last: bigint; hasMore: boolean }> {
  const rows: ActivityRow[] = [];
  let last = after;
  for (let round = 0; round < 8; round++) {
    const batch = await db.activityItem.findMany({
      where: { cubeId, position: { gt: last } },
      orderBy: { position: "asc" },
      take: 500,
    });
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

/** Checks a cursor against the cube: malformed/foreign → INVALID_ARGUMENT, ahead of the head too. */
export function positionOf(field: string, s: CubeStanding, cursor: string): bigint {
  const position = decodeCursor(field, s.cube.id, cursor);
  if (position > BigInt(s.cube.head)) throw new InvalidArgumentError(field, "is ahead of the cube's activity");
  return position;
}

/** A page of visible activity after a cursor. Requires READ. */
export async function readActivity(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  cursor: string,
  limit: number,
) {
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "reading");
  const after = positionOf("cursor", s, cursor);
  const page = await scanVisible(deps.prisma, cubeId, after, viewerOf(s), limit);
  return {
    items: await toItems(deps.prisma, page.rows),
    nextCursor: page.last === after ? cursor : encodeCursor(cubeId, page.last),
    hasMore: page.hasMore,
  };
}

/** What a drone may see since its inbox position; advances the position. */
export async function readUnread(deps: CubeDeps, principal: Principal, cubeId: string, limit: number) {
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
    return { items: await toItems(tx, page.rows), cursor: encodeCursor(cubeId, page.last), hasMore: page.hasMore };
  });
}
