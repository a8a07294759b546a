import type { Timestamp } from "@bufbuild/protobuf/wkt";
import {
  type ActivityItem,
  type Claim,
  ClaimState,
  type Entry,
  type Notification,
  NotificationKind,
  SeatState,
  Visibility,
} from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";

/**
 * The compact result format of the MCP tools (pure functions, unit-tested). A model reads the text:
 * one line per entry — `#<position> <author> → <audience> [<kind>]: <message>` — where the position
 * is the entry's place in the cube's order (`Entry.position`) and doubles as the reference every
 * tool taking an entry accepts (`#41`). `structuredContent` carries only the handles a program
 * needs beside that text (position ↔ entry id, notification kind), never the prose a second time.
 */

/** One rendered activity item: its text line and its structured handle. */
export interface Rendered {
  readonly line: string;
  readonly data: ItemData;
  /** What the item counts as in a summary. */
  readonly tally?: "direct" | "claim" | "ping" | "reply" | "question" | "stale";
}

/**
 * The structured handle of an item: `n` its position, which every tool taking an entry accepts
 * (`#n`); no entry id (the line names one where a next call needs it).
 */
export interface ItemData {
  n: number;
  /** For a notification: its kind (`ack`, `claim`, `release`, `ping`, `reply`, `stale`, `takeover`, `nudge`). */
  notice?: string;
}

/** Who is reading: the seat's drone (its own entries read "you") and labels of the cube's drones. */
export interface Viewer {
  readonly droneId?: string | undefined;
  readonly labels: ReadonlyMap<string, string>;
}

/** What an agent reads when the cube's retention pruned past the position its stream resumed from. */
export const PRUNED = "older activity was pruned by the cube's retention; log_read shows what is kept for you";

/** Whitespace folded to one space, cut at `max` characters (never ending in a space before the ellipsis). */
export function preview(text: string, max = 80): string {
  const folded = text.replace(/\s+/g, " ").trim();
  return folded.length > max ? `${folded.slice(0, max - 1).trimEnd()}…` : folded;
}

/**
 * What `seat_attach` says when cube answers SESSION_REJECTED: the saved token may be perfectly
 * valid — revoked or expired, or another client's, cube's, role's or drone's — and nothing changed.
 */
export const SESSION_REJECTED_TEXT =
  "SESSION_REJECTED: this session_token does not continue a seat here (revoked or expired, or another client's, cube's, role's or drone's); nothing changed — attach without it for a new seat";

/** `2026-12-01T17:20Z` (minutes are enough for a model; seconds when they matter are in `at`). */
export function shortTime(at: Timestamp | undefined): string {
  if (!at) return "-";
  return new Date(Number(at.seconds) * 1000).toISOString().slice(0, 16).concat("Z");
}

/** `2026-12-01T17:20:05Z`: to the second, where the order of close events matters (receipts). */
export function secondsTime(at: Timestamp | undefined): string {
  if (!at) return "-";
  return new Date(Number(at.seconds) * 1000).toISOString().slice(0, 19).concat("Z");
}

const NOTICE: Record<NotificationKind, string> = {
  [NotificationKind.UNSPECIFIED]: "notice",
  [NotificationKind.ACK]: "ack",
  [NotificationKind.CLAIM]: "claim",
  [NotificationKind.RELEASE]: "release",
  [NotificationKind.HEARTBEAT_PING]: "ping",
  [NotificationKind.REPLY]: "reply",
  [NotificationKind.CLAIM_STALE]: "stale",
  [NotificationKind.TAKEOVER]: "takeover",
  [NotificationKind.UNREAD_NUDGE]: "nudge",
};

/** The lower-case name of a notification kind. */
const noticeName = (kind: NotificationKind): string => NOTICE[kind] ?? "notice";

const STATE: Record<SeatState, string> = {
  [SeatState.UNSPECIFIED]: "",
  [SeatState.WORKING]: "working",
  [SeatState.WAITING]: "waiting",
  [SeatState.BLOCKED]: "blocked",
  [SeatState.IDLE]: "idle",
};

/** The lower-case name of a seat state ("" when unset). */
export const stateName = (state: SeatState): string => STATE[state] ?? "";

/** `you`, the drone's label as the viewer knows it, else `known` (the label cube sent), else an id prefix. */
const label = (viewer: Viewer, droneId: string, known?: string) =>
  droneId === viewer.droneId ? "you" : (viewer.labels.get(droneId) ?? (known || droneId.slice(0, 8)));

/** ` [claimed by worker-2, fence 1]`, ` [stale claim of worker-2, fence 1]` or "". */
export function claimNote(claim: Claim | undefined, viewer: Viewer): string {
  if (!claim || (!claim.holderDroneId && !claim.holderPrincipalId)) return "";
  if (claim.state === ClaimState.RELEASED) return "";
  // The holder's label travels with the claim (cube resolves it), so an answer never names it by an id prefix.
  const holder = claim.holderDroneId
    ? label(viewer, claim.holderDroneId, claim.holderLabel)
    : claim.holderLabel || "someone";
  const fence = claim.fence > 0n ? `, fence ${claim.fence}` : "";
  return claim.state === ClaimState.STALE ? ` [stale claim of ${holder}${fence}]` : ` [claimed by ${holder}${fence}]`;
}

/** The line and handle of one entry. */
export function renderEntry(entry: Entry, viewer: Viewer, positions?: ReadonlyMap<string, number>): Rendered {
  const n = Number(entry.position);
  const mine = entry.author?.droneId !== undefined && entry.author.droneId === viewer.droneId && viewer.droneId;
  const from = mine ? "you" : entry.author?.label || "someone";
  const direct = entry.visibility === Visibility.DIRECT;
  const to = direct ? entry.recipientDroneIds.map((id) => label(viewer, id)).join(",") || "direct" : "all";
  const kind = entry.question ? " [question]" : entry.kind ? ` [${entry.kind}]` : "";
  const parent = entry.replyToEntryId ? positions?.get(entry.replyToEntryId) : undefined;
  // The parent's position when it is listed beside the reply; a reply needs no id to be answered or
  // followed (reply_to / thread take the reply's own #position).
  const reply = entry.replyToEntryId ? (parent ? ` re #${parent}` : " (reply)") : "";
  const state = entry.seatState ? ` (now ${stateName(entry.seatState.state)})` : "";
  const acks = entry.ackCount > 0 ? ` (${entry.ackCount} ack${entry.ackCount > 1 ? "s" : ""})` : "";
  const message = entry.message.replace(/\r?\n/g, "\n  ");
  const line = `#${n} ${from} → ${to}${kind}${reply}${state}: ${message}${claimNote(entry.claim, viewer)}${acks}`;
  const toMe = direct && viewer.droneId !== undefined && entry.recipientDroneIds.includes(viewer.droneId);
  const tally = entry.question ? "question" : toMe ? "direct" : entry.replyToEntryId && !mine ? "reply" : undefined;
  return { line, data: { n }, ...(tally ? { tally } : {}) };
}

const QUIET_KINDS = new Set([NotificationKind.ACK, NotificationKind.HEARTBEAT_PING, NotificationKind.UNREAD_NUDGE]);

/** The line and handle of one notification; `positions` maps entry ids shown beside it to their `#n`. */
function renderNotification(
  notification: Notification,
  viewer: Viewer,
  positions?: ReadonlyMap<string, number>,
): Rendered {
  const n = Number(notification.position);
  const notice = noticeName(notification.kind);
  const actor = notification.actorDroneId
    ? label(viewer, notification.actorDroneId)
    : notification.actorRoleName || "unimatrix";
  // The text is `[KIND] <preview>`: the kind is already said, the preview is cut shorter.
  const text = preview(notification.text.replace(/^\[[A-Z_]+\]\s*/, ""), 60);
  const about = notification.entryId ? positions?.get(notification.entryId) : undefined;
  // The entry's id only where a next call may need it (a claim to take over, a reply to answer);
  // an ack or a ping names the entry by its preview.
  const needsId = !QUIET_KINDS.has(notification.kind);
  const ref = about ? ` on #${about}` : notification.entryId && needsId ? ` on ${notification.entryId}` : "";
  const line = `#${n} ${notice} by ${actor}${ref}${text ? `: ${text}` : ""}`;
  const tally =
    notification.kind === NotificationKind.HEARTBEAT_PING || notification.kind === NotificationKind.UNREAD_NUDGE
      ? "ping"
      : notification.kind === NotificationKind.CLAIM || notification.kind === NotificationKind.TAKEOVER
        ? "claim"
        : notification.kind === NotificationKind.CLAIM_STALE
          ? "stale"
          : undefined;
  return {
    line,
    data: { n, notice },
    ...(tally ? { tally } : {}),
  };
}

/** Renders items in order; a notification about an entry listed beside it names its `#n`. */
export function renderItems(items: readonly ActivityItem[], viewer: Viewer): Rendered[] {
  const positions = new Map<string, number>();
  for (const item of items) {
    if (item.item.case === "entry") positions.set(item.item.value.id, Number(item.item.value.position));
  }
  return items.flatMap((item) => {
    if (item.item.case === "entry") return [renderEntry(item.item.value, viewer, positions)];
    if (item.item.case === "notification") {
      // A reply notification says nothing its reply, listed beside it, does not.
      const { kind, entryId } = item.item.value;
      if (kind === NotificationKind.REPLY && positions.has(entryId)) return [];
      return [renderNotification(item.item.value, viewer, positions)];
    }
    return [];
  });
}

/** True for an entry the viewer wrote itself (never pushed back or listed as unread). */
export function isOwn(item: ActivityItem, droneId: string | undefined): boolean {
  return droneId !== undefined && item.item.case === "entry" && item.item.value.author?.droneId === droneId;
}

/** The ids of drones the lines would otherwise show as a bare id prefix (so a caller can fetch their labels). */
export function unlabelled(items: readonly ActivityItem[], viewer: Viewer): string[] {
  const ids = new Set<string>();
  for (const { item } of items) {
    const wanted =
      item.case === "entry"
        ? [...item.value.recipientDroneIds, item.value.claim?.holderDroneId ?? ""]
        : item.case === "notification"
          ? [item.value.actorDroneId]
          : [];
    for (const id of wanted) if (id && id !== viewer.droneId && !viewer.labels.has(id)) ids.add(id);
  }
  return [...ids];
}

/** Counts for the one-line summary at the head of a catch-up. */
export interface SummaryCounts {
  readonly decisions?: number;
}

/** `51 unread: 2 direct to you, 1 claim, 1 ping; 2 new decisions (decision_list)` — the first line of a catch-up. */
export function summaryLine(rendered: readonly Rendered[], more: boolean, extra: SummaryCounts = {}): string {
  const count = (tally: Rendered["tally"]) => rendered.filter((r) => r.tally === tally).length;
  const parts = [
    [count("direct"), "direct to you"],
    [count("reply"), "repl(ies) in your threads"],
    [count("question"), "question(s) to humans"],
    [count("claim"), "claim(s)"],
    [count("stale"), "stale claim(s)"],
    [count("ping"), "ping(s)"],
  ]
    .filter(([n]) => (n as number) > 0)
    .map(([n, what]) => `${n} ${what}`);
  const decisions = extra.decisions ? `; ${extra.decisions} new decision(s) (decision_list)` : "";
  const head = `${rendered.length}${more ? "+" : ""} unread`;
  return `${head}${parts.length ? `: ${parts.join(", ")}` : ""}${decisions}${more ? "; more: call log_read again" : ""}`;
}
