/** Row SQL of retention: the job lease, the floors due to rise, and one pruning batch. */
import type { RawQuery } from "@unimatrix/service-kit/store";

/**
 * Takes or renews the fleet-wide lease `name` for `holder` until `until`: true when `holder`
 * holds it now (it was free, expired at `now`, or already its own). One statement, so of any
 * number of replicas asking at once exactly one holds it.
 */
export async function takeJobLease(
  db: RawQuery,
  name: string,
  holder: string,
  now: Date,
  until: Date,
): Promise<boolean> {
  const rows = await db.$queryRaw<{ holder: string }[]>`
    INSERT INTO job_leases (name, holder, expires_at) VALUES (${name}, ${holder}, ${until})
    ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
    WHERE job_leases.holder = EXCLUDED.holder OR job_leases.expires_at <= ${now}
    RETURNING holder`;
  return rows.length === 1;
}

/** Gives the lease `name` up if `holder` holds it (a stopping replica), so another takes it at once. */
export async function dropJobLease(db: RawQuery, name: string, holder: string): Promise<void> {
  await db.$queryRaw`DELETE FROM job_leases WHERE name = ${name} AND holder = ${holder} RETURNING name`;
}

/** The service defaults a cube without its own retention settings follows (0 = no limit of that kind). */
export interface RetentionDefaults {
  readonly maxAgeSeconds: number;
  readonly maxItems: number;
}

/** A cube whose retained floor is due to rise: the floor it has and the one retention wants. */
export interface FloorDue {
  readonly cubeId: string;
  readonly floor: bigint;
  readonly target: bigint;
}

/**
 * Up to `limit` cubes after cube id `after` (in id order) whose floor is due to rise at `now`: the
 * count rule (`head - max_items`) and the age rule (the newest position created before
 * `now - max_age`), the higher of the two.
 */
export async function floorsDue(
  db: RawQuery,
  defaults: RetentionDefaults,
  now: Date,
  after: string,
  limit: number,
): Promise<FloorDue[]> {
  const rows = await db.$queryRaw<{ cube_id: string; floor: bigint; target: bigint }[]>`
    SELECT c.id::text AS cube_id, c.retained_floor AS floor, t.target
    FROM cubes c
    CROSS JOIN LATERAL (
      SELECT COALESCE(c.retention_max_items, ${defaults.maxItems}::int) AS max_items,
             COALESCE(c.retention_max_age_seconds, ${defaults.maxAgeSeconds}::int) AS max_age
    ) s
    CROSS JOIN LATERAL (
      SELECT GREATEST(
        CASE WHEN s.max_items > 0 THEN c.head - s.max_items ELSE 0 END,
        CASE WHEN s.max_age > 0 THEN COALESCE((
          SELECT max(a.position) FROM activity_items a
          WHERE a.cube_id = c.id AND a.created_at < ${now}::timestamptz - s.max_age * interval '1 second'
        ), 0) ELSE 0 END
      )::bigint AS target
    ) t
    WHERE t.target > c.retained_floor AND c.id > ${after}::uuid
    ORDER BY c.id
    LIMIT ${limit}`;
  return rows.map((r) => ({ cubeId: r.cube_id, floor: BigInt(r.floor), target: BigInt(r.target) }));
}

/** Raises a cube's retained floor to `target` (never lowers it); answers the floor it has now. */
export async function raiseFloor(db: RawQuery, cubeId: string, target: bigint): Promise<bigint> {
  const [row] = await db.$queryRaw<{ floor: bigint }[]>`
    UPDATE cubes SET retained_floor = GREATEST(retained_floor, ${target}::bigint)
    WHERE id = ${cubeId}::uuid RETURNING retained_floor AS floor`;
  return BigInt(row?.floor ?? 0n);
}

/** What one pruning statement removed. */
export interface Pruned {
  readonly entries: number;
  readonly notifications: number;
  readonly receipts: number;
  readonly notices: number;
  readonly acks: number;
  readonly claims: number;
}

/**
 * Deletes up to `batch` items of a cube at or below `floor`, oldest first, with their acks,
 * claims, receipts and notices — one statement. Kept regardless of age (what holders still hold,
 * judged at `now`): an entry with a live claim (HELD, lease not due), an open question (no
 * answer yet), a DIRECT entry a recipient drone has not read while that drone is not evicted and
 * holds a live session, and a thread root while any reply of it is stored.
 */
export async function pruneBatch(
  db: RawQuery,
  cubeId: string,
  floor: bigint,
  now: Date,
  batch: number,
): Promise<Pruned> {
  const [row] = await db.$queryRaw<
    { entries: bigint; notifications: bigint; receipts: bigint; notices: bigint; acks: bigint; claims: bigint }[]
  >`
    WITH victims AS (
      SELECT a.id FROM activity_items a
      WHERE a.cube_id = ${cubeId}::uuid AND a.position <= ${floor}
        AND NOT (a.question AND a.answer_entry_id IS NULL)
        AND NOT EXISTS (
          SELECT 1 FROM claims cl WHERE cl.entry_id = a.id AND cl.state = 'held' AND cl.stale_at > ${now})
        AND NOT (a.visibility = 'direct' AND EXISTS (
          SELECT 1 FROM receipts r JOIN drones d ON d.id = r.drone_id
          WHERE r.entry_id = a.id AND r.read_at IS NULL AND d.evicted_at IS NULL
            AND EXISTS (
              SELECT 1 FROM drone_sessions s
              WHERE s.drone_id = d.id AND s.revoked_at IS NULL AND s.expires_at > ${now})))
        AND NOT EXISTS (SELECT 1 FROM activity_items k WHERE k.thread_root_entry_id = a.id)
      ORDER BY a.position
      LIMIT ${batch}
    ),
    gone_acks AS (DELETE FROM acks WHERE entry_id IN (SELECT id FROM victims) RETURNING 1),
    gone_claims AS (DELETE FROM claims WHERE entry_id IN (SELECT id FROM victims) RETURNING 1),
    gone_receipts AS (DELETE FROM receipts WHERE entry_id IN (SELECT id FROM victims) RETURNING 1),
    gone_notices AS (DELETE FROM notices WHERE item_id IN (SELECT id FROM victims) RETURNING 1),
    gone AS (DELETE FROM activity_items WHERE id IN (SELECT id FROM victims) RETURNING item_type)
    SELECT (SELECT count(*) FROM gone WHERE item_type = 'entry') AS entries,
           (SELECT count(*) FROM gone WHERE item_type = 'notification') AS notifications,
           (SELECT count(*) FROM gone_receipts) AS receipts,
           (SELECT count(*) FROM gone_notices) AS notices,
           (SELECT count(*) FROM gone_acks) AS acks,
           (SELECT count(*) FROM gone_claims) AS claims`;
  return {
    entries: Number(row?.entries ?? 0),
    notifications: Number(row?.notifications ?? 0),
    receipts: Number(row?.receipts ?? 0),
    notices: Number(row?.notices ?? 0),
    acks: Number(row?.acks ?? 0),
    claims: Number(row?.claims ?? 0),
  };
}
