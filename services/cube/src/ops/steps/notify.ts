/**
 * The shared step that stores notifications inside an op's transaction (not an op: it opens no
 * transaction). Lock order within it: the coalescing marks, then the cube row (positions), then
 * the notices.
 */
import { randomUUID } from "node:crypto";
import { coalesces } from "../../rules/coalesce";
import { NOTICE_KINDS } from "../../rules/notices";
import { notificationText } from "../../rules/preview";
import type { CubeStanding } from "../../store/access";
import type { Tx } from "../../store/prisma";
import type { ActivityRow } from "../../store/rows";
import { insertItems, takePositions } from "../../tables/entries";
import { admitMarks } from "../../tables/marks";
import { queueNotices } from "../../tables/notices";

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

/** What `insertNotifications` wrote, and the machines it queued notices for (ring them after the commit). */
export interface WrittenNotifications {
  readonly written: NewNotification[];
  readonly noticeMachines: string[];
}

/**
 * Stores notifications in the cube's order (inside the caller's transaction). With a coalescing
 * window, an ACK or REPLY from an actor drone to a recipient that got one of the same kind from
 * that actor within the window is dropped (`admitMarks`: fleet-safe). Those of the NOTICE_KINDS
 * also queue a notice for their recipient when its live session runs on a machine.
 */
export async function insertNotifications(
  tx: Tx,
  cubeId: string,
  items: NewNotification[],
  now: Date,
  coalesceSeconds = 0,
): Promise<WrittenNotifications> {
  const written = await coalesce(tx, items, now, coalesceSeconds);
  if (written.length === 0) return { written, noticeMachines: [] };
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
  await insertItems(tx, rows);
  // What a drone must not miss also goes to the machine its live session runs on (same transaction).
  const subjects = rows
    .filter((r) => NOTICE_KINDS.has(r.notificationKind))
    .map((r) => ({ cubeId, itemId: r.id, entryId: r.entryId, droneIds: r.recipientDroneIds }));
  const queued = await queueNotices(tx, subjects, now);
  return { written, noticeMachines: queued.map((q) => q.machineId) };
}

const markKind = (n: NewNotification) => n.coalesceAs ?? n.kind;
const markKey = (n: NewNotification) => `${n.recipientDroneId}/${n.actorDroneId}/${markKind(n)}`;

async function coalesce(tx: Tx, items: NewNotification[], now: Date, windowSeconds: number) {
  const subject = new Map<string, NewNotification>();
  for (const n of items) if (coalesces(n.kind, n.actorDroneId, windowSeconds)) subject.set(markKey(n), n);
  if (subject.size === 0) return items;
  const marks = [...subject.values()].map((n) => ({
    recipientDroneId: n.recipientDroneId,
    actorDroneId: n.actorDroneId as string,
    kind: markKind(n),
  }));
  const pass = await admitMarks(tx, marks, now, new Date(now.getTime() - windowSeconds * 1000));
  const seen = new Set<string>();
  return items.filter((n) => {
    if (!coalesces(n.kind, n.actorDroneId, windowSeconds)) return true;
    const key = markKey(n);
    if (!pass.has(key) || seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** One notification of `kind` about `entry` from the acting drone (if any) to each of `audience`. */
export function aboutEntry(
  audience: readonly string[],
  kind: "claim" | "release" | "takeover",
  entry: ActivityRow,
  s: Pick<CubeStanding, "drone">,
): NewNotification[] {
  const text = notificationText(kind, entry.message);
  return audience.map((recipientDroneId) => ({
    recipientDroneId,
    kind,
    text,
    entryId: entry.id,
    actorDroneId: s.drone?.id,
    actorRoleName: s.drone?.roleName,
  }));
}
