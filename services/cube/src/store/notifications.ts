import { randomUUID } from "node:crypto";
import { StoreAnomalyError } from "@unimatrix/service-kit/store";
import { coalesces } from "../rules/coalesce";
import { NOTICE_KINDS, type QueuedFor, queueNotices } from "./notices";
import type { Tx } from "./prisma";

/** Takes `count` positions of a cube's order; locks the cube row until commit (commit order = position order). */
export async function takePositions(tx: Tx, cubeId: string, count: number): Promise<bigint> {
  const [row] = await tx.$queryRaw<{ head: bigint }[]>`
    UPDATE cubes SET head = head + ${count} WHERE id = ${cubeId}::uuid RETURNING head`;
  if (!row) throw new StoreAnomalyError(`cube ${cubeId} vanished under a held transaction`);
  return BigInt(row.head) - BigInt(count) + 1n;
}

/** The kinds of notification stored. */
export type NotificationKindName =
  | "ack"
  | "claim"
  | "release"
  | "heartbeat_ping"
  | "reply"
  | "claim_stale"
  | "takeover"
  | "unread_nudge";

/** A notification to store. */
export interface NewNotification {
  readonly recipientDroneId: string;
  readonly kind: NotificationKindName;
  readonly text: string;
  readonly entryId?: string;
  readonly actorDroneId?: string;
  readonly actorRoleName?: string;
  /**
   * What repeats are counted by within the coalescing window, beside recipient and actor;
   * defaults to the kind. A REPLY names its thread, so answers in two threads both arrive.
   */
  readonly coalesceAs?: string;
}

/**
 * Stores notifications in the cube's order (inside the caller's transaction). With a coalescing
 * window, an ACK or REPLY from an actor drone to a recipient that got one of the same kind from
 * that actor within the window is dropped; the decision is one conditional upsert of the
 * `notification_marks` rows, so concurrent writers (any replica) agree: the mark's row lock lets
 * one through and the others see its fresh `last_at`. Returns the notifications written. Those
 * of the NOTICE_KINDS also queue a notice for their recipient when its live session runs on a
 * machine (`queueNotices`, same transaction); `noticesFor` names those machines.
 */
export async function insertNotifications(
  tx: Tx,
  cubeId: string,
  items: NewNotification[],
  now: Date,
  coalesceSeconds = 0,
): Promise<WrittenNotifications> {
  const written = await coalesce(tx, items, now, coalesceSeconds);
  if (written.length === 0) return Object.assign(written, { noticesFor: [] });
  const first = await takePositions(tx, cubeId, written.length);
  const rows = written.map((n, i) => ({
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
    expectsReply: false,
    question: false,
    replyCount: 0,
  }));
  await tx.activityItem.createMany({ data: rows });
  // What a drone must not miss also goes to the machine its live session runs on (same transaction).
  const subjects = rows
    .filter((r) => NOTICE_KINDS.has(r.notificationKind))
    .map((r) => ({ cubeId, itemId: r.id, entryId: r.entryId, droneIds: r.recipientDroneIds }));
  return Object.assign(written, { noticesFor: await queueNotices(tx, subjects, now) });
}

/**
 * The notifications `insertNotifications` wrote, and the machines it queued notices for: ring
 * them after the commit with `ringNotices(deps, written.noticesFor)` (a missed ring is healed by
 * the notice watch's poll within seconds).
 */
export type WrittenNotifications = NewNotification[] & { readonly noticesFor: readonly QueuedFor[] };

const markKind = (n: NewNotification) => n.coalesceAs ?? n.kind;
const markKey = (n: NewNotification) => `${n.recipientDroneId}/${n.actorDroneId}/${markKind(n)}`;

async function coalesce(tx: Tx, items: NewNotification[], now: Date, windowSeconds: number) {
  const subject = new Map<string, NewNotification>();
  for (const n of items) if (coalesces(n.kind, n.actorDroneId, windowSeconds)) subject.set(markKey(n), n);
  if (subject.size === 0) return items;
  const marks = [...subject.values()];
  const cutoff = new Date(now.getTime() - windowSeconds * 1000);
  const admitted = await tx.$queryRaw<{ recipient_drone_id: string; actor_drone_id: string; kind: string }[]>`
    INSERT INTO notification_marks (recipient_drone_id, actor_drone_id, kind, last_at)
    SELECT r, a, k, ${now} FROM unnest(${marks.map((n) => n.recipientDroneId)}::uuid[],
                                      ${marks.map((n) => n.actorDroneId)}::uuid[],
                                      ${marks.map(markKind)}::text[]) AS x(r, a, k)
    ORDER BY r, a, k
    ON CONFLICT (recipient_drone_id, actor_drone_id, kind) DO UPDATE SET last_at = EXCLUDED.last_at
      WHERE notification_marks.last_at <= ${cutoff}
    RETURNING recipient_drone_id::text, actor_drone_id::text, kind`;
  const pass = new Set(admitted.map((m) => `${m.recipient_drone_id}/${m.actor_drone_id}/${m.kind}`));
  const seen = new Set<string>();
  return items.filter((n) => {
    if (!coalesces(n.kind, n.actorDroneId, windowSeconds)) return true;
    const key = markKey(n);
    if (!pass.has(key) || seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
