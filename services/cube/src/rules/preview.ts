/** The longest notification preview, in characters (code points). */
export const PREVIEW_CHARS = 200;

/** Folds whitespace runs to one space, trims and cuts at 200 characters (code points): the notification preview. */
export function preview(message: string): string {
  const folded = message.replace(/\s+/gu, " ").trim();
  return Array.from(folded).slice(0, PREVIEW_CHARS).join("");
}

/** The kinds of notification that refer to an entry. */
export type ReactionKind = "ack" | "claim" | "release" | "reply" | "claim_stale" | "takeover" | "unread_nudge";

const TAGS: Record<ReactionKind, string> = {
  ack: "ACK",
  claim: "CLAIM",
  release: "RELEASE",
  reply: "REPLY",
  claim_stale: "STALE",
  takeover: "TAKEOVER",
  unread_nudge: "UNREAD",
};

/**
 * The text of a notification about an entry: `[ACK] <preview>`, `[CLAIM] …`, `[RELEASE] …`,
 * `[REPLY] …`, `[STALE] …`, `[TAKEOVER] …`, `[UNREAD] …`.
 */
export function notificationText(kind: ReactionKind, message: string): string {
  return `[${TAGS[kind]}] ${preview(message)}`;
}

/** The text of a liveness ping. */
export const PING_TEXT = "[PING] are you still there? post to the log to stay live";
