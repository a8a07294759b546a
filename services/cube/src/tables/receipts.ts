/** Rows of `receipts`: per recipient of an entry, when it was delivered, read, acked and nudged. Row SQL only. */
import type { RawQuery } from "@unimatrix/service-kit/store";
import type { PrismaClient, Tx } from "../store/prisma";
import type { Receipt } from "../store/rows";

/** How an entry reached a recipient (the `delivered_via` column). */
export type DeliveryVia = "stream" | "machine_link" | "hook";

/** One delivery to record. */
export interface Delivery {
  readonly entryId: string;
  readonly droneId: string;
  readonly via: DeliveryVia;
  readonly at: Date;
}

/**
 * Records the first delivery of an entry to a recipient drone: sets `delivered_at`/`delivered_via`
 * on its receipt when not delivered yet (a later delivery, on any channel, changes nothing).
 * Returns whether this call recorded it. No receipt row (not a DIRECT recipient nor a drone a reply
 * notified) is not an error: nothing is written and it answers false.
 */
export async function markDelivered(db: RawQuery, delivery: Delivery): Promise<boolean> {
  const rows = await db.$queryRaw<{ entry_id: string }[]>`
    UPDATE receipts SET delivered_at = ${delivery.at}, delivered_via = ${delivery.via}
    WHERE entry_id = ${delivery.entryId}::uuid AND drone_id = ${delivery.droneId}::uuid AND delivered_at IS NULL
    RETURNING entry_id::text`;
  return rows.length > 0;
}

/**
 * Records many first deliveries in one statement (the stream's batched recorder). Returns how many
 * receipts were newly marked delivered.
 */
export async function markDeliveredMany(db: RawQuery, deliveries: readonly Delivery[]): Promise<number> {
  if (deliveries.length === 0) return 0;
  const rows = await db.$queryRaw<{ entry_id: string }[]>`
    UPDATE receipts r SET delivered_at = d.at, delivered_via = d.via
    FROM (SELECT DISTINCT ON (e, dr) e, dr, at, via
          FROM unnest(${deliveries.map((d) => d.entryId)}::uuid[], ${deliveries.map((d) => d.droneId)}::uuid[],
                      ${deliveries.map((d) => d.at)}::timestamptz[], ${deliveries.map((d) => d.via)}::text[])
               AS x(e, dr, at, via)
          ORDER BY e, dr, at) d
    WHERE r.entry_id = d.e AND r.drone_id = d.dr AND r.delivered_at IS NULL
    RETURNING r.entry_id::text`;
  return rows.length;
}

/** Marks entries read by a drone (first read only). */
export async function markRead(db: RawQuery, droneId: string, entryIds: readonly string[], at: Date): Promise<void> {
  if (entryIds.length === 0) return;
  await db.$queryRaw`
    UPDATE receipts SET read_at = ${at}
    WHERE drone_id = ${droneId}::uuid AND entry_id = ANY(${[...entryIds]}::uuid[]) AND read_at IS NULL
    RETURNING entry_id`;
}

/** Marks an entry acked by a drone (and read, if it was not: an ack implies it was seen). */
export async function markAcked(db: RawQuery, droneId: string, entryId: string, at: Date): Promise<void> {
  await db.$queryRaw`
    UPDATE receipts SET acked_at = ${at}, read_at = COALESCE(read_at, ${at})
    WHERE drone_id = ${droneId}::uuid AND entry_id = ${entryId}::uuid AND acked_at IS NULL
    RETURNING entry_id`;
}

/** A receipt to open: one recipient of an entry, in recipient order. */
export interface NewReceipt {
  readonly droneId: string;
  /** Whether the unread nudge applies (DIRECT, expecting a reply). */
  readonly nudge: boolean;
}

/** Opens receipts for an entry's recipients, numbered after `ordinalFrom` (an existing one is kept). */
export async function openReceipts(
  db: RawQuery,
  cubeId: string,
  entryId: string,
  receipts: readonly NewReceipt[],
  at: Date,
  ordinalFrom = 0,
): Promise<void> {
  if (receipts.length === 0) return;
  await db.$queryRaw`
    INSERT INTO receipts (entry_id, drone_id, cube_id, ordinal, created_at, nudge)
    SELECT ${entryId}::uuid, x.drone, ${cubeId}::uuid, x.ord::int + ${ordinalFrom}::int, ${at}, x.nudge
    FROM unnest(${receipts.map((r) => r.droneId)}::uuid[], ${receipts.map((r) => r.nudge)}::boolean[])
         WITH ORDINALITY AS x(drone, nudge, ord)
    ON CONFLICT (entry_id, drone_id) DO NOTHING
    RETURNING entry_id`;
}

/** The receipts of an entry, in recipient order, with each drone's label. */
export async function receiptsOf(db: PrismaClient | Tx, entryId: string): Promise<(Receipt & { label: string })[]> {
  const receipts = await db.receipt.findMany({
    where: { entryId },
    orderBy: [{ ordinal: "asc" }, { droneId: "asc" }],
  });
  const drones = await db.drone.findMany({
    where: { id: { in: receipts.map((r) => r.droneId) } },
    select: { id: true, label: true },
  });
  const labels = new Map(drones.map((d) => [d.id, d.label]));
  return receipts.map((r) => ({ ...r, label: labels.get(r.droneId) ?? "" }));
}

/** The most unread nudges one scan round sends. */
const NUDGE_SCAN_LIMIT = 25;

/**
 * Stamps due unread nudges: up to 25 receipts of DIRECT entries expecting a reply, unread by a
 * non-evicted recipient and posted before `postedBefore`, never nudged, picked `FOR UPDATE SKIP
 * LOCKED` and stamped `nudged_at` in one statement. A stamped receipt is out of the window for good.
 */
export async function stampDueNudges(tx: RawQuery, now: Date, postedBefore: Date) {
  return tx.$queryRaw<
    { entry_id: string; drone_id: string; cube_id: string; message: string; author_drone_id: string | null }[]
  >`
    WITH due AS (
      SELECT r.entry_id, r.drone_id FROM receipts r
      JOIN drones d ON d.id = r.drone_id AND d.evicted_at IS NULL
      WHERE r.nudge AND r.read_at IS NULL AND r.nudged_at IS NULL AND r.created_at <= ${postedBefore}
      ORDER BY r.created_at, r.entry_id, r.drone_id
      LIMIT ${NUDGE_SCAN_LIMIT}
      FOR UPDATE OF r SKIP LOCKED
    )
    UPDATE receipts SET nudged_at = ${now}
    FROM due, activity_items a
    WHERE receipts.entry_id = due.entry_id AND receipts.drone_id = due.drone_id AND a.id = receipts.entry_id
      AND receipts.nudged_at IS NULL
    RETURNING receipts.entry_id::text, receipts.drone_id::text, receipts.cube_id::text, a.message,
              a.author_drone_id::text`;
}
