/** Rows of `notices`: an activity item to carry to the machine a recipient drone's session runs on. Row SQL only. */
import type { RawQuery } from "@unimatrix/service-kit/store";

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

/**
 * THE statement that queues notices (the append's one statement inlines the same for its DIRECT
 * recipients), inside the caller's transaction: for each subject, one notice per recipient drone
 * whose newest live session (unrevoked, unexpired at `at`) names a machine. Idempotent per (item,
 * drone). Returns the machines notices were queued for, to ring after the commit.
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

/** A machine's notice locked for confirming: its entry, drone, whether confirmed, and whether it delivers the entry. */
export interface LockedNotice {
  readonly entry_id: string | null;
  readonly drone_id: string;
  readonly confirmed_at: Date | null;
  /** The entry itself (DIRECT) or a reply (its REPLY notification): confirming it is the entry's delivery. */
  readonly delivers: boolean;
}

/** A notice of this tenant's machine locked `FOR UPDATE OF` the notice, or null when not this machine's. */
export async function lockNotice(tx: RawQuery, tenantId: string, machineId: string, noticeId: string) {
  const [row] = await tx.$queryRaw<LockedNotice[]>`
    SELECT n.entry_id::text, n.drone_id::text, n.confirmed_at,
           (a.item_type = 'entry' OR a.notification_kind = 'reply') AS delivers
    FROM notices n JOIN activity_items a ON a.id = n.item_id
    WHERE n.id = ${noticeId}::uuid AND n.tenant_id = ${tenantId}::uuid AND n.machine_id = ${machineId}::uuid
    FOR UPDATE OF n`;
  return row ?? null;
}

/** Stamps a notice confirmed. */
export async function stampConfirmed(tx: RawQuery, noticeId: string, now: Date): Promise<void> {
  await tx.$queryRaw`UPDATE notices SET confirmed_at = ${now} WHERE id = ${noticeId}::uuid RETURNING id`;
}
