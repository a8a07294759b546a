/**
 * The console's rules for threads, questions, receipts, claim leases and seat state: plain data
 * in, plain data out (no DOM), so `test/console-coordination.unit.test.ts` holds them in process.
 */
import type { Claim, Drone, Entry, Question, Receipt } from "./api";
import { enumLabel } from "./dom";

/** A drone's own word on what it is doing, apart from liveness. */
export interface SeatStateView {
  /** `working`, `waiting`, `blocked` or `idle`. */
  readonly state: string;
  readonly note: string;
  readonly changedAt: string | undefined;
}

/** The drone's seat state, or undefined while it never set one (`SEAT_STATE_UNSPECIFIED`). */
export function seatStateView(drone: Pick<Drone, "state" | "stateNote" | "stateChangedAt">): SeatStateView | undefined {
  if (!drone.state || drone.state === "SEAT_STATE_UNSPECIFIED") return undefined;
  return { state: enumLabel(drone.state, "SEAT_STATE_"), note: drone.stateNote ?? "", changedAt: drone.stateChangedAt };
}

/** The log line of a SetSeatState entry: "now waiting: on CI run 88", "now working". */
export function seatChangeText(change: NonNullable<Entry["seatState"]>): string {
  const state = enumLabel(change.state, "SEAT_STATE_");
  return change.note ? `now ${state}: ${change.note}` : `now ${state}`;
}

/**
 * The drones list after a SetSeatState entry arrived on the stream: the author's state, note and
 * change time, as the next ListDrones would answer. Other entries leave the list as it is.
 */
export function applySeatChange(drones: readonly Drone[], entry: Entry): Drone[] {
  const droneId = entry.author?.droneId;
  if (!entry.seatState || !droneId) return [...drones];
  return drones.map((d) =>
    d.id === droneId
      ? { ...d, state: entry.seatState?.state, stateNote: entry.seatState?.note ?? "", stateChangedAt: entry.createdAt }
      : d,
  );
}

/** A claim lease as the console shows it. */
export interface ClaimView {
  readonly holder: string;
  readonly fence: string;
  /** `held` or `stale` (a claim with no state yet counts as held). */
  readonly state: "held" | "stale";
  /** HELD: when it turns stale unless renewed; STALE: when it turned stale. */
  readonly staleAt: string | undefined;
  /** One line: "held by worker-1 · fence 2". */
  readonly text: string;
}

/** The claim on an entry, or undefined when it is unclaimed or released. */
export function claimView(
  claim: Claim | undefined,
  label: (droneId: string | undefined) => string,
): ClaimView | undefined {
  if (!claim || (!claim.holderDroneId && !claim.holderPrincipalId) || claim.state === "CLAIM_STATE_RELEASED")
    return undefined;
  const holder = claim.holderLabel || label(claim.holderDroneId);
  const state = claim.state === "CLAIM_STATE_STALE" ? "stale" : "held";
  const fence = claim.fence ?? "";
  return {
    holder,
    fence,
    state,
    staleAt: claim.staleAt,
    text: `${state} by ${holder}${fence ? ` · fence ${fence}` : ""}`,
  };
}

/** How far an entry got with one recipient: the furthest step reached. */
export type ReceiptStatus = "pending" | "delivered" | "read" | "acked";

/** One recipient's receipt: its status and each step with its time. */
export interface ReceiptView {
  readonly droneId: string;
  readonly label: string;
  readonly status: ReceiptStatus;
  readonly deliveredAt: string | undefined;
  /** `stream`, `machine link`, or "" before delivery. */
  readonly via: string;
  readonly readAt: string | undefined;
  readonly ackedAt: string | undefined;
  readonly nudgedAt: string | undefined;
}

/** A receipt as the console shows it (an ack or a read implies the earlier steps happened). */
export function receiptView(receipt: Receipt): ReceiptView {
  const status: ReceiptStatus = receipt.ackedAt
    ? "acked"
    : receipt.readAt
      ? "read"
      : receipt.deliveredAt
        ? "delivered"
        : "pending";
  const via =
    receipt.deliveredVia && receipt.deliveredVia !== "DELIVERY_CHANNEL_UNSPECIFIED"
      ? enumLabel(receipt.deliveredVia, "DELIVERY_CHANNEL_")
      : "";
  return {
    droneId: receipt.droneId,
    label: receipt.label || receipt.droneId.slice(0, 8),
    status,
    deliveredAt: receipt.deliveredAt,
    via,
    readAt: receipt.readAt,
    ackedAt: receipt.ackedAt,
    nudgedAt: receipt.nudgedAt,
  };
}

/** Who may see an entry's receipts from this console: a user or client (not seated), or the author's seat. */
export function mayListReceipts(entry: Entry, seatDroneId: string | undefined): boolean {
  if (entry.visibility !== "VISIBILITY_DIRECT") return false;
  return seatDroneId === undefined || entry.author?.droneId === seatDroneId;
}

/** The body of an AppendEntry that replies to `parent`, and whom it reaches (for the form's hint). */
export interface ReplyPlan {
  readonly body: {
    cubeId: string;
    message: string;
    replyToEntryId: string;
    visibility: "VISIBILITY_BROADCAST" | "VISIBILITY_DIRECT";
    recipientDroneIds: string[];
  };
  /** "everyone" or the recipients' labels. */
  readonly audience: string;
}

/**
 * A reply reaches the audience of the entry it answers: a broadcast is answered to everyone; a
 * direct entry (a question to the humans included) is answered directly to its author drone and
 * its other recipients, never to the replying seat itself nor to an evicted drone. A direct entry
 * with no such drone left (a user's direct post answered by its only recipient) is answered to
 * everyone, and the form says so before it is sent.
 */
export function replyPlan(
  cubeId: string,
  parent: Entry,
  message: string,
  seatDroneId: string | undefined,
  drones: readonly Drone[],
): ReplyPlan {
  const base = { cubeId, message, replyToEntryId: parent.id };
  if (parent.visibility === "VISIBILITY_DIRECT") {
    const active = new Set(drones.filter((d) => !d.evictedAt).map((d) => d.id));
    const wanted = [parent.author?.droneId, ...(parent.recipientDroneIds ?? [])];
    const recipients = [...new Set(wanted)].filter(
      (id): id is string => id !== undefined && id !== "" && id !== seatDroneId && active.has(id),
    );
    if (recipients.length > 0) {
      const labels = recipients.map((id) => drones.find((d) => d.id === id)?.label || id.slice(0, 8));
      return {
        body: { ...base, visibility: "VISIBILITY_DIRECT", recipientDroneIds: recipients },
        audience: `${labels.join(", ")} (direct)`,
      };
    }
  }
  return { body: { ...base, visibility: "VISIBILITY_BROADCAST", recipientDroneIds: [] }, audience: "everyone" };
}

/** The thread an entry belongs to (its root's id), or undefined for an entry outside any thread. */
export function threadOf(entry: Pick<Entry, "id" | "threadRootEntryId" | "replyCount">): string | undefined {
  if (entry.threadRootEntryId) return entry.threadRootEntryId;
  return (entry.replyCount ?? 0) > 0 ? entry.id : undefined;
}

/**
 * An entry new on the stream that replies into a known root: the root with one more reply.
 * Answers undefined when the entry is no reply or its root is not in view.
 */
export function countReply(entries: ReadonlyMap<string, Entry>, reply: Entry): Entry | undefined {
  const rootId = reply.threadRootEntryId || reply.replyToEntryId;
  if (!rootId || rootId === reply.id) return undefined;
  const root = entries.get(rootId);
  if (!root) return undefined;
  return { ...root, replyCount: (root.replyCount ?? 0) + 1 };
}

/** "1 reply", "3 replies". */
export function repliesText(count: number): string {
  return `${count} ${count === 1 ? "reply" : "replies"}`;
}

/** The open questions after `list` was read: newest first, answered ones dropped, one per id. */
export function openQuestions(list: readonly Question[]): Question[] {
  const seen = new Set<string>();
  return list
    .filter((q) => !q.answer && !seen.has(q.entry.id) && seen.add(q.entry.id))
    .sort((a, b) => Date.parse(b.entry.createdAt ?? "") - Date.parse(a.entry.createdAt ?? ""));
}

/**
 * Whether an entry new on the stream changes the open questions: a new question, or a reply into
 * the thread of an open one (the cube decides whether it counts as the answer: a user's or a
 * human seat's reply does, so the list is read again rather than guessed).
 */
export function touchesQuestions(entry: Entry, open: readonly Question[]): boolean {
  if (entry.question) return true;
  const ids = new Set(open.map((q) => q.entry.id));
  return ids.has(entry.replyToEntryId ?? "") || ids.has(entry.threadRootEntryId ?? "");
}

/** The questions badge: "1 open question", "3 open questions", "50+ open questions". */
export function questionCountText(count: number, more = false): string {
  return `${count}${more ? "+" : ""} open question${count === 1 && !more ? "" : "s"}`;
}

/** A one-line preview of a message: whitespace folded, cut at `max` characters with an ellipsis. */
export function preview(message: string | undefined, max = 80): string {
  const text = (message ?? "").replace(/\s+/g, " ").trim();
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
