import type { Bus } from "@unimatrix/service-kit/bus";
import { publishAfterCommit } from "@unimatrix/service-kit/bus";
import { NotFoundError } from "@unimatrix/service-kit/errors";
import type { RawQuery } from "@unimatrix/service-kit/store";
import type { Logger } from "pino";
import type { CubeDeps } from "../handlers/deps";
import { inTransaction } from "./prisma";
import { markDelivered } from "./receipts";

/** Notification kinds a drone must not miss: each queues a notice for a drone on a machine. */
export const NOTICE_KINDS: ReadonlySet<string> = new Set(["reply", "claim_stale", "takeover", "unread_nudge"]);

/** The machine a notice is for: its doorbell is rung after the commit that queued it. */
export interface QueuedFor {
  readonly tenantId: string;
  readonly machineId: string;
}

/** One activity item to queue notices for, one per recipient drone whose live session names a machine. */
export interface NoticeSubject {
  readonly cubeId: string;
  /** The activity item (a DIRECT entry or a notification). */
  readonly itemId: string;
  /** The entry it is about (the entry itself, or the notification's entry); null when none. */
  readonly entryId: string | null;
  readonly droneIds: readonly string[];
}

/** A machine's notice doorbell (`notices:<machine id>`): rung after a commit that queued notices for it. */
export function noticeChannel(machineId: string): string {
  return `notices:${machineId}`;
}

/** Rings the machines' notice doorbells after a commit (the kit's post-commit publish: never throws). */
export async function ringNotices(
  deps: { bus: Bus; logger: Logger },
  machines: Iterable<{ readonly machineId: string }>,
): Promise<void> {
  const channels = [...new Set([...machines].map((m) => noticeChannel(m.machineId)))];
  if (channels.length > 0) await publishAfterCommit(deps.bus, channels, "notice", deps.logger);
}

/**
 * THE function that queues notices, inside the caller's transaction: for each subject, one notice
 * per recipient drone whose newest live session (unrevoked, unexpired at `at`) names a machine.
 * Idempotent per (item, drone). Returns the machines notices were queued for — ring them with
 * `ringNotices` after the commit (a missed ring is healed by the watch's poll).
 */
export async function queueNotices(db: RawQuery, subjects: readonly NoticeSubject[], at: Date): Promise<QueuedFor[]> {
  const items: string[] = [];
  const entries: (string | null)[] = [];
  const drones: string[] = [];
  const cubes: string[] = [];
  for (const s of subjects) {
    for (const droneId of s.droneIds) {
      items.push(s.itemId);
      entries.push(s.entryId);
      drones.push(droneId);
      cubes.push(s.cubeId);
    }
  }
  if (items.length === 0) return [];
  const rows = await db.$queryRaw<{ tenant_id: string; machine_id: string }[]>`
    INSERT INTO notices (id, tenant_id, machine_id, cube_id, drone_id, item_id, entry_id, created_at)
    SELECT gen_random_uuid(), s.tenant_id, s.machine_id, x.cube_id, x.drone_id, x.item_id, x.entry_id, ${at}
    FROM unnest(${items}::uuid[], ${entries}::uuid[], ${drones}::uuid[], ${cubes}::uuid[])
         AS x(item_id, entry_id, drone_id, cube_id)
    CROSS JOIN LATERAL (
      SELECT ds.tenant_id, ds.machine_id FROM drone_sessions ds
      WHERE ds.drone_id = x.drone_id AND ds.revoked_at IS NULL AND ds.expires_at > ${at}
        AND ds.machine_id IS NOT NULL
      ORDER BY ds.created_at DESC LIMIT 1) s
    ON CONFLICT (item_id, drone_id) DO NOTHING
    RETURNING tenant_id::text, machine_id::text`;
  return distinctMachines(rows);
}

/**
 * The machines notices about an entry were queued for: the entry's own (DIRECT) and those of
 * notifications about it (a REPLY names the reply), to ring after the commit that queued them.
 */
export async function noticesQueuedFor(db: RawQuery, entryId: string): Promise<QueuedFor[]> {
  const rows = await db.$queryRaw<{ tenant_id: string; machine_id: string }[]>`
    SELECT DISTINCT tenant_id::text, machine_id::text FROM notices WHERE entry_id = ${entryId}::uuid`;
  return distinctMachines(rows);
}

/** The distinct machines of queued rows. */
export function distinctMachines(rows: readonly { tenant_id: string; machine_id: string }[]): QueuedFor[] {
  const seen = new Map<string, QueuedFor>();
  for (const r of rows) seen.set(r.machine_id, { tenantId: r.tenant_id, machineId: r.machine_id });
  return [...seen.values()];
}

/** A pending notice as WatchNotices sends it: the notice row with its item, drone label and entry author. */
export interface PendingNotice {
  readonly id: string;
  readonly seq: bigint;
  readonly cubeId: string;
  readonly droneId: string;
  readonly droneLabel: string;
  readonly entryId: string | null;
  readonly itemType: string;
  readonly notificationKind: string | null;
  readonly authorLabel: string | null;
  readonly message: string;
  readonly createdAt: Date;
}

interface PendingRow {
  id: string;
  seq: bigint | string;
  cube_id: string;
  drone_id: string;
  drone_label: string | null;
  entry_id: string | null;
  item_type: string;
  notification_kind: string | null;
  author_label: string | null;
  message: string;
  created_at: Date | string;
}

/** The unconfirmed notices of a machine of a tenant, oldest first (at most `limit`). */
export async function pendingNotices(
  db: RawQuery,
  tenantId: string,
  machineId: string,
  limit: number,
): Promise<PendingNotice[]> {
  const rows = await db.$queryRaw<PendingRow[]>`
    SELECT n.id::text, n.seq, n.cube_id::text, n.drone_id::text, d.label AS drone_label, n.entry_id::text,
           a.item_type, a.notification_kind, a.author_label, a.message, n.created_at
    FROM notices n
    JOIN activity_items a ON a.id = n.item_id
    LEFT JOIN drones d ON d.id = n.drone_id
    WHERE n.machine_id = ${machineId}::uuid AND n.tenant_id = ${tenantId}::uuid AND n.confirmed_at IS NULL
    ORDER BY n.seq
    LIMIT ${limit}`;
  return rows.map((r) => ({
    id: r.id,
    seq: BigInt(r.seq),
    cubeId: r.cube_id,
    droneId: r.drone_id,
    droneLabel: r.drone_label ?? "",
    entryId: r.entry_id,
    itemType: r.item_type,
    notificationKind: r.notification_kind,
    authorLabel: r.author_label,
    message: r.message,
    createdAt: new Date(r.created_at),
  }));
}

/**
 * Confirms a notice of the calling machine: sets `confirmed_at` once and, in the same
 * transaction, the entry's receipt delivered via MACHINE_LINK (first delivery only) when the
 * notice carried the entry (DIRECT) or a reply (REPLY). Idempotent:
 * a repeat answers false and changes nothing. NOT_FOUND when the notice is not this machine's.
 */
export async function confirmNotice(
  deps: CubeDeps,
  tenantId: string,
  machineId: string,
  noticeId: string,
): Promise<boolean> {
  const now = deps.clock.now();
  return inTransaction(deps.prisma, async (tx) => {
    const [row] = await tx.$queryRaw<
      { entry_id: string | null; drone_id: string; confirmed_at: Date | null; delivers: boolean }[]
    >`
      SELECT n.entry_id::text, n.drone_id::text, n.confirmed_at,
             (a.item_type = 'entry' OR a.notification_kind = 'reply') AS delivers
      FROM notices n JOIN activity_items a ON a.id = n.item_id
      WHERE n.id = ${noticeId}::uuid AND n.tenant_id = ${tenantId}::uuid AND n.machine_id = ${machineId}::uuid
      FOR UPDATE OF n`;
    if (!row) throw new NotFoundError("notice not found");
    if (row.confirmed_at !== null) return false;
    await tx.$queryRaw`UPDATE notices SET confirmed_at = ${now} WHERE id = ${noticeId}::uuid RETURNING id`;
    // The entry itself (DIRECT) or a reply (its REPLY notification) was delivered; a CLAIM_STALE,
    // TAKEOVER or UNREAD_NUDGE about an entry is not that entry's delivery.
    if (row.entry_id && row.delivers) {
      await markDelivered(tx, { entryId: row.entry_id, droneId: row.drone_id, via: "machine_link", at: now });
    }
    return true;
  });
}
