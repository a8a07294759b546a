import type { CubeDeps } from "../handlers/deps";
import { ACTIVITY, ringAfterCommit } from "../live/channels";
import { PING_TEXT } from "../rules/preview";
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
