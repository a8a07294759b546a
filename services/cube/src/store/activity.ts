import { randomUUID } from "node:crypto";
import type { Principal } from "@unimatrix/service-kit/auth";
import { FailedPreconditionError, InvalidArgumentError, PermissionDeniedError } from "@unimatrix/service-kit/errors";
import { type RawQuery, StoreAnomalyError } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../handlers/deps";
import { ACTIVITY, ringAfterCommit } from "../live/channels";
import { authorPrincipalId, READ, WRITE } from "../rules/access";
import { cursorPosition } from "../rules/cursor";
import { MAX_RECIPIENTS, type NewEntry } from "../rules/entry";
import { staleAtFor } from "../rules/lease";
import { taxonomyKinds } from "../rules/taxonomy";
import { type Viewer, viewerOf, visibleTo } from "../rules/visibility";
import { type CubeStanding, requireAccess, requireCachedAccess } from "./access";
import { noticesQueuedFor, ringNotices } from "./notices";
import { inTransaction, type PrismaClient, type Tx } from "./prisma";
import { type ActivityRow, type EntryState, type ItemRow, NO_REACTIONS } from "./rows";
import { afterReply, replyTarget } from "./threads";

/** Display label of a principal: the drone label, user name or client name. */
export async function labelOf(db: Tx, principal: Principal, s: Pick<CubeStanding, "drone">): Promise<string> {
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
    db.claim.findMany({ where: { entryId: { in: entryIds }, state: { not: "released" } } }),
  ]);
  return rows.map((row): ItemRow => {
    if (row.itemType !== "entry") return { row, state: NO_REACTIONS };
    const mine = acks.filter((a) => a.entryId === row.id);
    const state: EntryState = {
      ackCount: mine.length,
      ackedByDroneIds: mine.flatMap((a) => (a.droneId ? [a.droneId] : [])),
      claim: claims.find((c) => c.entryId === row.id) ?? null,
      replyCount: row.replyCount,
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
  // Access from the replica's auth cache (no round trip in the common case); the insert is the one statement.
  const { view: pre } = await requireCachedAccess(deps, principal, cubeId, WRITE, "posting");
  if (input.visibility === "broadcast" && pre.drone && !pre.drone.canBroadcast)
    throw new PermissionDeniedError("this drone's role cannot broadcast");
  if (input.kind !== undefined && pre.taxonomyJson && !taxonomyKinds(pre.taxonomyJson).has(input.kind))
    throw new InvalidArgumentError("kind", "is not one of the cube's taxonomy kinds");
  const parent = input.replyToEntryId ? await replyTarget(deps, pre, cubeId, input.replyToEntryId) : null;
  await deps.guard.admit(Buffer.byteLength(input.message) + input.recipientDroneIds.length * 80 + 200);
  const now = deps.clock.now();
  const label = await labelOf(deps.prisma, principal, pre);
  let recipients = input.recipientDroneIds;
  if (recipients.length > 0) {
    const live = await deps.prisma.drone.count({
      where: { id: { in: recipients }, cubeId, evictedAt: null },
    });
    if (live !== recipients.length)
      throw new InvalidArgumentError("recipient_drone_ids", "every recipient must be a live drone of this cube");
  } else if (input.visibility === "direct" && input.askHuman) {
    recipients = (await liveHumanSeats(deps.prisma, cubeId, now)).filter((id) => id !== pre.drone?.id);
  }
  const row: ActivityRow = {
    ...blankEntry(),
    id: randomUUID(),
    cubeId,
    createdAt: now,
    authorDroneId: pre.drone?.id ?? null,
    authorPrincipalId: authorPrincipalId(principal),
    authorPrincipalKind: principal.kind,
    authorLabel: label,
    message: input.message,
    visibility: input.visibility,
    recipientDroneIds: recipients,
    kind: input.kind ?? null,
    replyToEntryId: parent?.id ?? null,
    threadRootEntryId: parent ? (parent.threadRootEntryId ?? parent.id) : null,
    expectsReply: input.expectsReply,
    question: input.askHuman,
  };
  const receipts = input.visibility === "direct" ? recipients : [];
  if (!parent) {
    // One statement, one round trip (see insertEntry).
    row.position = await insertEntry(deps.fast, row, receipts, deps.config.claimLeaseSeconds);
  } else {
    await inTransaction(deps.prisma, async (tx) => {
      row.position = await insertEntry(tx, row, receipts, deps.config.claimLeaseSeconds);
      await afterReply(deps, tx, pre, principal, row, parent);
    });
  }
  await ringAfterCommit(deps, [cubeId], ACTIVITY);
  // Notices this entry queued (DIRECT) or its reply notifications queued (REPLY): ring their machines.
  if (receipts.length > 0 || parent) await ringNotices(deps, await noticesQueuedFor(deps.fast, row.id));
  return { row, state: NO_REACTIONS };
}

/** An entry row with every optional column empty (callers fill what they set). */
export function blankEntry(): ActivityRow {
  return {
    id: "",
    cubeId: "",
    position: 0n,
    itemType: "entry",
    createdAt: new Date(0),
    authorDroneId: null,
    authorPrincipalId: null,
    authorPrincipalKind: null,
    authorLabel: null,
    message: "",
    visibility: "broadcast",
    recipientDroneIds: [],
    kind: null,
    notificationKind: null,
    entryId: null,
    actorDroneId: null,
    actorRoleName: null,
    replyToEntryId: null,
    threadRootEntryId: null,
    expectsReply: true,
    question: false,
    answerEntryId: null,
    seatState: null,
    seatStateNote: null,
    replyCount: 0,
  };
}

/**
 * Inserts an entry in ONE statement: touch the author drone and renew its held claims (its
 * activity), take the next position under the cube row lock, insert the entry, and open the
 * receipts of `receiptDroneIds` (DIRECT recipients; the nudge applies when a reply is expected)
 * and their notices (a recipient whose live session runs on a machine, see store/notices.ts).
 * The drone and claim locks are taken before the cube lock (every path takes claims before the
 * cube), so commit order is position order. Returns the position.
 */
export async function insertEntry(
  db: RawQuery,
  row: ActivityRow,
  receiptDroneIds: readonly string[],
  leaseSeconds: number,
): Promise<bigint> {
  const now = row.createdAt;
  const due = staleAtFor(now, leaseSeconds);
  const nudge = row.visibility === "direct" && row.expectsReply;
  const [inserted] = await db.$queryRaw<{ position: bigint | string }[]>`
    WITH touch AS (
      UPDATE drones SET last_seen_at = ${now}, last_log_post_at = ${now}, silent_ping_count = 0,
                        last_silent_ping_at = NULL
      WHERE id = ${row.authorDroneId}::uuid RETURNING id
    ), renew AS (
      UPDATE claims SET renewed_at = ${now}, stale_at = ${due}
      WHERE holder_drone_id = (SELECT id FROM touch) AND state = 'held' RETURNING entry_id
    ), pos AS (
      UPDATE cubes SET head = head + 1
      WHERE id = ${row.cubeId}::uuid AND (SELECT count(*) FROM touch) >= 0 AND (SELECT count(*) FROM renew) >= 0
      RETURNING head
    ), ins AS (
      INSERT INTO activity_items (id, cube_id, position, item_type, created_at, author_drone_id, author_principal_id,
                                  author_principal_kind, author_label, message, visibility, recipient_drone_ids, kind,
                                  reply_to_entry_id, thread_root_entry_id, expects_reply, question, seat_state,
                                  seat_state_note)
      SELECT ${row.id}::uuid, ${row.cubeId}::uuid, pos.head, 'entry', ${now}, ${row.authorDroneId}::uuid,
             ${row.authorPrincipalId}, ${row.authorPrincipalKind}, ${row.authorLabel}, ${row.message},
             ${row.visibility}, ${row.recipientDroneIds}::uuid[], ${row.kind}, ${row.replyToEntryId}::uuid,
             ${row.threadRootEntryId}::uuid, ${row.expectsReply}, ${row.question}, ${row.seatState},
             ${row.seatStateNote}
      FROM pos
      RETURNING id, position
    ), rec AS (
      INSERT INTO receipts (entry_id, drone_id, cube_id, ordinal, created_at, nudge)
      SELECT ins.id, x.drone, ${row.cubeId}::uuid, x.ord::int, ${now}, ${nudge}
      FROM ins, unnest(${[...receiptDroneIds]}::uuid[]) WITH ORDINALITY AS x(drone, ord)
      RETURNING 1
    ), queued AS (
      -- A notice per DIRECT recipient whose newest live session runs on a machine (store/notices.ts).
      INSERT INTO notices (id, tenant_id, machine_id, cube_id, drone_id, item_id, entry_id, created_at)
      SELECT gen_random_uuid(), s.tenant_id, s.machine_id, ${row.cubeId}::uuid, s.drone_id, ins.id, ins.id, ${now}
      FROM ins CROSS JOIN LATERAL (
        SELECT DISTINCT ON (ds.drone_id) ds.drone_id, ds.tenant_id, ds.machine_id FROM drone_sessions ds
        WHERE ${row.visibility}::text = 'direct' AND ds.drone_id = ANY(${[...receiptDroneIds]}::uuid[])
          AND ds.revoked_at IS NULL AND ds.expires_at > ${now} AND ds.machine_id IS NOT NULL
        ORDER BY ds.drone_id, ds.created_at DESC) s
      ON CONFLICT (item_id, drone_id) DO NOTHING
      RETURNING 1
    )
    SELECT position, (SELECT count(*) FROM rec) AS receipts FROM ins`;
  if (!inserted) throw new StoreAnomalyError(`cube ${row.cubeId} vanished while appending`);
  return BigInt(inserted.position);
}

/** The live human-seat drones of a cube (a human-seat role, not evicted, a live session), oldest first. */
export async function liveHumanSeats(db: PrismaClient | Tx, cubeId: string, now: Date): Promise<string[]> {
  const rows = await db.$queryRaw<{ id: string }[]>`
    SELECT d.id::text FROM drones d JOIN roles r ON r.id = d.role_id AND r.human_seat
    WHERE d.cube_id = ${cubeId}::uuid AND d.evicted_at IS NULL
      AND EXISTS (SELECT 1 FROM drone_sessions s WHERE s.drone_id = d.id AND s.revoked_at IS NULL AND s.expires_at > ${now})
    ORDER BY d.created_at, d.id
    LIMIT ${MAX_RECIPIENTS}`;
  return rows.map((r) => r.id);
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
