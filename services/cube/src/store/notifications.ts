import { randomUUID } from "node:crypto";
import { StoreAnomalyError } from "@unimatrix/service-kit/store";
import { NOTICE_KINDS, type QueuedFor, queueNotices } from "./notices";
import type { Tx } from "./prisma";

/** Takes `count` positions of a cube's order; locks the cube row until commit (commit order = position order). */
export async function takePositions(tx: Tx, cubeId: string, count: number): Promise<bigint> {
  const [row] = await tx.$queryRaw<{ head: bigint }[]>`
    UPDATE cubes SET head = head + ${count} WHERE id = ${cubeId}::uuid RETURNING head`;
  if (!row) throw new StoreAnomalyError(`cube ${cubeId} vanished under a held transaction`);
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

/**
 * Stores notifications in the cube's order (inside the caller's transaction). Those of the
 * NOTICE_KINDS also queue a notice for their recipient when its live session runs on a machine
 * (same transaction); the machines are returned for `ringNotices` after the commit.
 */
export async function insertNotifications(
  tx: Tx,
  cubeId: string,
  items: NewNotification[],
  now: Date,
): Promise<QueuedFor[]> {
  if (items.length === 0) return [];
  const first = await takePositions(tx, cubeId, items.length);
  const rows = items.map((n, i) => ({
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
  }));
  await tx.activityItem.createMany({ data: rows });
  const subjects = rows
    .filter((r) => NOTICE_KINDS.has(r.notificationKind))
    .map((r) => ({ cubeId, itemId: r.id, entryId: r.entryId, droneIds: r.recipientDroneIds }));
  return queueNotices(tx, subjects, now);
}
