/**
 * Rows of `activity_items` (entries and notifications) and the cube's position counter. Row SQL
 * only: no access checks, no transactions of its own (callers pass a transaction or the pool).
 */
import { randomUUID } from "node:crypto";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { type RawQuery, StoreAnomalyError } from "@unimatrix/service-kit/store";

import { type EntryRef, MAX_RECIPIENTS, type NewEntry } from "../rules/entry";
import { requireVisible, type Viewer, type ViewerFacts, viewerOf, visibleTo } from "../rules/visibility";
import type { PrismaClient, Tx } from "../store/prisma";
import { type ActivityRow, type EntryState, type ItemRow, NO_REACTIONS, type Prisma } from "../store/rows";

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

/** The row a new post becomes (its position is taken by `insertEntry`). */
export function postRow(
  cubeId: string,
  author: { principalId: string; kind: string; droneId: string | undefined; label: string },
  entry: NewEntry,
  recipients: readonly string[],
  parent: ActivityRow | null,
  now: Date,
): ActivityRow {
  return {
    ...blankEntry(),
    id: randomUUID(),
    cubeId,
    createdAt: now,
    authorDroneId: author.droneId ?? null,
    authorPrincipalId: author.principalId,
    authorPrincipalKind: author.kind,
    authorLabel: author.label,
    message: entry.message,
    visibility: entry.visibility,
    recipientDroneIds: [...recipients],
    kind: entry.kind ?? null,
    replyToEntryId: parent?.id ?? null,
    threadRootEntryId: parent ? (parent.threadRootEntryId ?? parent.id) : null,
    expectsReply: entry.expectsReply,
    question: entry.askHuman,
  };
}

/** What `insertEntry` wrote: the entry's position and the machines notices were queued for. */
export interface InsertedEntry {
  readonly position: bigint;
  readonly noticeMachines: string[];
}

/**
 * Inserts an entry in ONE statement: touch the author drone and renew its held claims (its
 * activity — the same renewal as `renewHeldClaims` in tables/claims.ts, inline so the append stays
 * one round trip), take the next position under the cube row lock, insert the entry, and open the
 * receipts of `receiptDroneIds` (DIRECT recipients; the nudge applies when a reply is expected)
 * and their notices (a recipient whose newest live session runs on a machine, as
 * tables/notices.ts `queueNotices`). The drone and claim locks are taken before the cube lock
 * (every path takes claims before the cube), so commit order is position order.
 */
export async function insertEntry(
  db: RawQuery,
  row: ActivityRow,
  receiptDroneIds: readonly string[],
  /** The author's held claims renew to this instant (rules/lease `staleAtFor`). */
  due: Date,
): Promise<InsertedEntry> {
  const now = row.createdAt;
  const nudge = row.visibility === "direct" && row.expectsReply;
  const [inserted] = await db.$queryRaw<{ position: bigint | string; machines: string[] | null }[]>`
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
      INSERT INTO notices (id, tenant_id, machine_id, cube_id, drone_id, item_id, entry_id, created_at)
      SELECT gen_random_uuid(), s.tenant_id, s.machine_id, ${row.cubeId}::uuid, s.drone_id, ins.id, ins.id, ${now}
      FROM ins CROSS JOIN LATERAL (
        SELECT DISTINCT ON (ds.drone_id) ds.drone_id, ds.tenant_id, ds.machine_id FROM drone_sessions ds
        WHERE ${row.visibility}::text = 'direct' AND ds.drone_id = ANY(${[...receiptDroneIds]}::uuid[])
          AND ds.revoked_at IS NULL AND ds.expires_at > ${now} AND ds.machine_id IS NOT NULL
        ORDER BY ds.drone_id, ds.created_at DESC) s
      ON CONFLICT (item_id, drone_id) DO NOTHING
      RETURNING machine_id
    )
    SELECT position, (SELECT count(*) FROM rec) AS receipts,
           (SELECT array_agg(DISTINCT machine_id::text) FROM queued) AS machines
    FROM ins`;
  if (!inserted) throw new StoreAnomalyError(`cube ${row.cubeId} vanished while appending`);
  return { position: BigInt(inserted.position), noticeMachines: inserted.machines ?? [] };
}

/** Takes `count` positions of a cube's order; locks the cube row until commit (commit order = position order). */
export async function takePositions(tx: RawQuery, cubeId: string, count: number): Promise<bigint> {
  const [row] = await tx.$queryRaw<{ head: bigint }[]>`
    UPDATE cubes SET head = head + ${count} WHERE id = ${cubeId}::uuid RETURNING head`;
  if (!row) throw new StoreAnomalyError(`cube ${cubeId} vanished under a held transaction`);
  return BigInt(row.head) - BigInt(count) + 1n;
}

/** Inserts notification rows (their positions already taken). */
export async function insertItems(tx: Tx, rows: readonly Prisma.ActivityItemCreateManyInput[]): Promise<void> {
  await tx.activityItem.createMany({ data: [...rows] });
}

/** An entry of a cube by id or position (any visibility: the caller decides), or null. */
export function entryOf(db: PrismaClient | Tx, cubeId: string, ref: EntryRef): Promise<ActivityRow | null> {
  const where = "id" in ref ? { id: ref.id } : { position: ref.position };
  return db.activityItem.findFirst({ where: { ...where, cubeId, itemType: "entry" } });
}

/**
 * A visible entry of the cube for a standing's viewer, else NOT_FOUND (an unseen entry reads as a
 * missing one): `entry not found` for an id, `<field>: no entry #n visible to you` for a position.
 */
export async function visibleEntry(
  db: PrismaClient | Tx,
  s: ViewerFacts,
  cubeId: string,
  ref: EntryRef,
): Promise<ActivityRow> {
  const missing = "id" in ref ? notFoundText(ref.field) : `${ref.field}: no entry #${ref.position} visible to you`;
  return requireVisible(viewerOf(s), await entryOf(db, cubeId, ref), missing);
}

/** What a missing entry named by id reads as (the original texts: AppendEntry's names its field). */
function notFoundText(field: string): string {
  return field === "entry_id" ? "entry not found" : `${field}: entry not found`;
}

/**
 * Who a new entry is addressed to: the live (not evicted) drones its ids and labels name — ids
 * first, then labels in the given order, without repeats; INVALID_ARGUMENT naming the field of the
 * first name that is none — or, for a question to the humans without names, the cube's live
 * human seats but its author; none for a broadcast.
 */
export async function addressees(
  db: PrismaClient | Tx,
  cubeId: string,
  entry: Pick<NewEntry, "visibility" | "recipientDroneIds" | "recipientLabels" | "askHuman">,
  now: Date,
  authorDroneId: string | undefined,
): Promise<string[]> {
  const { recipientDroneIds: droneIds, recipientLabels: labels } = entry;
  if (droneIds.length === 0 && labels.length === 0) {
    if (entry.visibility !== "direct" || !entry.askHuman) return [];
    return (await liveHumanSeats(db, cubeId, now)).filter((id) => id !== authorDroneId);
  }
  const rows = await db.drone.findMany({
    where: { cubeId, evictedAt: null, OR: [{ id: { in: [...droneIds] } }, { label: { in: [...labels] } }] },
    select: { id: true, label: true },
  });
  const ids = new Set(rows.map((r) => r.id));
  if (droneIds.some((id) => !ids.has(id)))
    throw new InvalidArgumentError("recipient_drone_ids", "every recipient must be a live drone of this cube");
  const byLabel = new Map(rows.map((r) => [r.label, r.id]));
  const out = [...droneIds];
  for (const label of labels) {
    const id = byLabel.get(label);
    if (id === undefined) throw new InvalidArgumentError("recipient_labels", `no live drone labelled ${label}`);
    if (!out.includes(id)) out.push(id);
  }
  if (out.length > MAX_RECIPIENTS)
    throw new InvalidArgumentError("recipient_drone_ids", `DIRECT needs 1-${MAX_RECIPIENTS} recipients`);
  return out;
}

/** The live human-seat drones of a cube (a human-seat role, not evicted, a live session), oldest first. */
async function liveHumanSeats(db: PrismaClient | Tx, cubeId: string, now: Date): Promise<string[]> {
  const rows = await db.$queryRaw<{ id: string }[]>`
    SELECT d.id::text FROM drones d JOIN roles r ON r.id = d.role_id AND r.human_seat
    WHERE d.cube_id = ${cubeId}::uuid AND d.evicted_at IS NULL
      AND EXISTS (SELECT 1 FROM drone_sessions s WHERE s.drone_id = d.id AND s.revoked_at IS NULL AND s.expires_at > ${now})
    ORDER BY d.created_at, d.id
    LIMIT ${MAX_RECIPIENTS}`;
  return rows.map((r) => r.id);
}

/** Counts a reply on its thread's root. */
export async function countReply(tx: RawQuery, rootId: string): Promise<void> {
  await tx.$queryRaw`UPDATE activity_items SET reply_count = reply_count + 1 WHERE id = ${rootId}::uuid RETURNING id`;
}

/** The drones that posted in a thread (its root's author and every reply's). */
export async function threadAuthors(db: RawQuery, cubeId: string, rootId: string): Promise<string[]> {
  const rows = await db.$queryRaw<{ id: string }[]>`
    SELECT DISTINCT author_drone_id::text AS id FROM activity_items
    WHERE cube_id = ${cubeId}::uuid AND item_type = 'entry' AND author_drone_id IS NOT NULL
      AND (id = ${rootId}::uuid OR thread_root_entry_id = ${rootId}::uuid)`;
  return rows.map((r) => r.id);
}

/** Marks the open questions among `entryIds` answered by `answerId`. */
export async function markAnswered(tx: RawQuery, entryIds: readonly string[], answerId: string): Promise<void> {
  await tx.$queryRaw`
    UPDATE activity_items SET answer_entry_id = ${answerId}::uuid
    WHERE id = ANY(${[...entryIds]}::uuid[]) AND question AND answer_entry_id IS NULL
    RETURNING id`;
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

/**
 * A cube's retained floor (0 for an unknown cube). Retention raises it before it deletes, so a
 * scan followed by this read knows whether rows it should have seen may have been pruned under it.
 */
export async function floorOf(db: PrismaClient | Tx, cubeId: string): Promise<bigint> {
  const cube = await db.cube.findUnique({ where: { id: cubeId }, select: { retainedFloor: true } });
  return BigInt(cube?.retainedFloor ?? 0n);
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

/** A page of items with the position read from and the last position scanned. */
export interface ItemPage {
  readonly items: ItemRow[];
  readonly after: bigint;
  readonly last: bigint;
  readonly hasMore: boolean;
}
