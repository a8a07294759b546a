import type { CubeDeps } from "../handlers/deps";
import { ACTIVITY, ringAfterCommit } from "../live/channels";
import { notificationText, PING_TEXT } from "../rules/preview";
import { scanClaims } from "./leases";
import { type QueuedFor, ringNotices } from "./notices";
import { insertNotifications } from "./notifications";
import { inTransaction } from "./prisma";

/** Thresholds of the liveness scan. */
export const SILENT_MS = 10 * 60_000;
export const COOLDOWN_MS = 10 * 60_000;
export const MAX_PINGS = 3;
export const SCAN_LIMIT = 25;

/**
 * One liveness round: claims up to 25 silent participant drones with a live session (oldest
 * first) with `FOR UPDATE SKIP LOCKED`, bumps their ping state in the same statement's transaction,
 * then stores one HEARTBEAT_PING per drone in its cube. Replicas scanning together skip each
 * other's rows, and a committed bump moves a drone out of the window, so each drone is pinged once
 * per round. Returns the pinged drone ids.
 */
export async function scanLiveness(deps: CubeDeps): Promise<string[]> {
  const now = deps.clock.now();
  const silentBefore = new Date(now.getTime() - SILENT_MS);
  const cooldownBefore = new Date(now.getTime() - COOLDOWN_MS);
  const pinged = await inTransaction(deps.prisma, async (tx) => {
    const rows = await tx.$queryRaw<{ id: string; cube_id: string }[]>`
      WITH picked AS (
        SELECT d.id FROM drones d
        JOIN clients c ON c.id = d.client_id AND c.revoked_at IS NULL
        JOIN cube_grants g ON g.client_id = d.client_id AND g.cube_id = d.cube_id AND g.access >= 2
        WHERE d.evicted_at IS NULL
          AND d.last_seen_at <= ${silentBefore}
          AND d.silent_ping_count < ${MAX_PINGS}
          AND (d.last_silent_ping_at IS NULL OR d.last_silent_ping_at <= ${cooldownBefore})
          AND EXISTS (SELECT 1 FROM drone_sessions s
                      WHERE s.drone_id = d.id AND s.revoked_at IS NULL AND s.expires_at > ${now})
        ORDER BY d.last_seen_at, d.id
        LIMIT ${SCAN_LIMIT}
        FOR UPDATE OF d SKIP LOCKED
      )
      UPDATE drones SET silent_ping_count = silent_ping_count + 1, last_silent_ping_at = ${now}
      FROM picked WHERE drones.id = picked.id
      RETURNING drones.id::text, drones.cube_id::text`;
    return rows;
  });
  for (const row of pinged) {
    await inTransaction(deps.prisma, (tx) =>
      insertNotifications(
        tx,
        row.cube_id,
        [
          {
            recipientDroneId: row.id,
            kind: "heartbeat_ping",
            text: PING_TEXT,
          },
        ],
        now,
      ),
    );
  }
  await ringAfterCommit(
    deps,
    pinged.map((r) => r.cube_id),
    ACTIVITY,
  );
  return pinged.map((r) => r.id);
}

/**
 * One round of unread nudges: up to 25 receipts of DIRECT entries expecting a reply, unread by a
 * non-evicted recipient `CUBE_UNREAD_NUDGE_SECONDS` after they were posted and never nudged, are
 * picked with `FOR UPDATE SKIP LOCKED` and stamped `nudged_at` in one statement; in the same
 * transaction each recipient gets one UNREAD_NUDGE. A stamped receipt is out of the window for good,
 * so each nudge goes once, whatever the number of replicas or rounds. Returns `entry/drone` pairs.
 */
export async function scanNudges(deps: CubeDeps): Promise<{ entryId: string; droneId: string }[]> {
  const now = deps.clock.now();
  const postedBefore = new Date(now.getTime() - deps.config.unreadNudgeSeconds * 1000);
  const machines: QueuedFor[] = [];
  const nudged = await inTransaction(deps.prisma, async (tx) => {
    const rows = await tx.$queryRaw<
      { entry_id: string; drone_id: string; cube_id: string; message: string; author_drone_id: string | null }[]
    >`
      WITH due AS (
        SELECT r.entry_id, r.drone_id FROM receipts r
        JOIN drones d ON d.id = r.drone_id AND d.evicted_at IS NULL
        WHERE r.nudge AND r.read_at IS NULL AND r.nudged_at IS NULL AND r.created_at <= ${postedBefore}
        ORDER BY r.created_at, r.entry_id, r.drone_id
        LIMIT ${SCAN_LIMIT}
        FOR UPDATE OF r SKIP LOCKED
      )
      UPDATE receipts SET nudged_at = ${now}
      FROM due, activity_items a
      WHERE receipts.entry_id = due.entry_id AND receipts.drone_id = due.drone_id AND a.id = receipts.entry_id
        AND receipts.nudged_at IS NULL
      RETURNING receipts.entry_id::text, receipts.drone_id::text, receipts.cube_id::text, a.message,
                a.author_drone_id::text`;
    const byCube = new Map<string, typeof rows>();
    for (const row of rows) byCube.set(row.cube_id, [...(byCube.get(row.cube_id) ?? []), row]);
    // Cubes in one order for every scanner, so two replicas' rounds never lock cube rows crosswise.
    for (const [cubeId, items] of [...byCube].sort(([a], [b]) => a.localeCompare(b))) {
      const written = await insertNotifications(
        tx,
        cubeId,
        items.map((row) => ({
          recipientDroneId: row.drone_id,
          kind: "unread_nudge",
          text: notificationText("unread_nudge", row.message),
          entryId: row.entry_id,
          actorDroneId: row.author_drone_id ?? undefined,
        })),
        now,
      );
      machines.push(...written.noticesFor);
    }
    return rows;
  });
  await ringAfterCommit(deps, [...new Set(nudged.map((r) => r.cube_id))], ACTIVITY);
  await ringNotices(deps, machines);
  return nudged.map((r) => ({ entryId: r.entry_id, droneId: r.drone_id }));
}

/** What one full liveness round did. */
export interface LivenessRound {
  /** Drones pinged for silence. */
  readonly pinged: string[];
  /** Entries whose claims turned stale. */
  readonly staleClaims: string[];
  /** Unread nudges sent. */
  readonly nudges: { entryId: string; droneId: string }[];
}

/** The liveness background job's round: silent pings, claim leases, unread nudges. */
export async function livenessRound(deps: CubeDeps): Promise<LivenessRound> {
  const pinged = await scanLiveness(deps);
  const staleClaims = await scanClaims(deps);
  const nudges = await scanNudges(deps);
  return { pinged, staleClaims, nudges };
}
