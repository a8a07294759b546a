/**
 * The liveness round (the background job, every `CUBE_LIVENESS_INTERVAL_MS`): silent pings, claim
 * leases, unread nudges — three transactions, each picking its rows `FOR UPDATE SKIP LOCKED` so
 * replicas scanning together split them and each is acted on once.
 *
 * Lock order: pings — the drone rows, then per drone its cube row (HEARTBEAT_PING, one transaction
 * each); claims — the due claim rows → cube rows in cube-id order (CLAIM_STALE positions) →
 * notices; nudges — the due receipt rows → cube rows in cube-id order (UNREAD_NUDGE positions) →
 * notices. Cube rows are always taken in one order, so two replicas' rounds never deadlock.
 */
import type { CubeDeps } from "../deps";
import type { Effects, OpResult } from "../effects";
import { notificationText, PING_TEXT } from "../rules/preview";
import { inTransaction } from "../store/prisma";
import { staleDueClaims } from "../tables/claims";
import { claimAudience, stampSilentDrones } from "../tables/drones";
import { stampDueNudges } from "../tables/receipts";
import { insertNotifications } from "./steps/notify";

/** What one full liveness round did. */
export interface LivenessRound {
  /** Drones pinged for silence. */
  readonly pinged: string[];
  /** Entries whose claims turned stale. */
  readonly staleClaims: string[];
  /** Unread nudges sent. */
  readonly nudges: { entryId: string; droneId: string }[];
}

/**
 * Silent pings: up to 25 silent participant drones with a live session are stamped in one
 * transaction, then each gets one HEARTBEAT_PING in its cube. Returns the pinged drone ids.
 */
async function pingSilent(deps: CubeDeps): Promise<OpResult<string[]>> {
  const now = deps.clock.now();
  const pinged = await inTransaction(deps.prisma, (tx) => stampSilentDrones(tx, now));
  for (const row of pinged) {
    await inTransaction(deps.prisma, (tx) =>
      insertNotifications(
        tx,
        row.cube_id,
        [{ recipientDroneId: row.id, kind: "heartbeat_ping", text: PING_TEXT }],
        now,
      ),
    );
  }
  return { result: pinged.map((r) => r.id), effects: { activity: pinged.map((r) => r.cube_id) } };
}

/** Claim leases: due HELD claims turn STALE; the holder and the audience get CLAIM_STALE once. */
async function staleClaims(deps: CubeDeps): Promise<OpResult<string[]>> {
  const now = deps.clock.now();
  const machines: string[] = [];
  const staled = await inTransaction(deps.prisma, async (tx) => {
    const rows = await staleDueClaims(tx, now);
    for (const row of [...rows].sort((a, b) => a.cube_id.localeCompare(b.cube_id))) {
      const entry = await tx.activityItem.findUniqueOrThrow({ where: { id: row.entry_id } });
      const audience = await claimAudience(tx, entry, row.holder_drone_id ?? undefined);
      if (row.holder_drone_id) audience.unshift(row.holder_drone_id);
      const text = notificationText("claim_stale", entry.message);
      const notified = await insertNotifications(
        tx,
        row.cube_id,
        audience.map((recipientDroneId) => ({ recipientDroneId, kind: "claim_stale", text, entryId: entry.id })),
        now,
      );
      machines.push(...notified.noticeMachines);
    }
    return rows;
  });
  return {
    result: staled.map((r) => r.entry_id),
    effects: { activity: staled.map((r) => r.cube_id), noticeMachines: machines },
  };
}

/**
 * Unread nudges: due receipts are stamped `nudged_at` and, in the same transaction, each
 * recipient gets one UNREAD_NUDGE. Returns `entry/drone` pairs.
 */
async function nudgeUnread(deps: CubeDeps): Promise<OpResult<{ entryId: string; droneId: string }[]>> {
  const now = deps.clock.now();
  const postedBefore = new Date(now.getTime() - deps.config.unreadNudgeSeconds * 1000);
  const machines: string[] = [];
  const nudged = await inTransaction(deps.prisma, async (tx) => {
    const rows = await stampDueNudges(tx, now, postedBefore);
    const byCube = new Map<string, typeof rows>();
    for (const row of rows) byCube.set(row.cube_id, [...(byCube.get(row.cube_id) ?? []), row]);
    for (const [cubeId, items] of [...byCube].sort(([a], [b]) => a.localeCompare(b))) {
      const notified = await insertNotifications(
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
      machines.push(...notified.noticeMachines);
    }
    return rows;
  });
  return {
    result: nudged.map((r) => ({ entryId: r.entry_id, droneId: r.drone_id })),
    effects: { activity: nudged.map((r) => r.cube_id), noticeMachines: machines },
  };
}

/**
 * One liveness round: pings, then claims, then nudges, each's effects published after its own
 * commit (by `publish`, the service's effect publisher) before the next step starts.
 */
export async function livenessRound(
  deps: CubeDeps,
  publish: (effects: Effects) => Promise<void>,
): Promise<LivenessRound> {
  const step = async <T>(op: Promise<OpResult<T>>): Promise<T> => {
    const { result, effects } = await op;
    await publish(effects);
    return result;
  };
  const pinged = await step(pingSilent(deps));
  const staleClaimIds = await step(staleClaims(deps));
  const nudges = await step(nudgeUnread(deps));
  return { pinged, staleClaims: staleClaimIds, nudges };
}
