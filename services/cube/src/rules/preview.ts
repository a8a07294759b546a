/** The longest notification preview, in characters (code points). */
export const PREVIEW_CHARS = 200;

/**
 * Folds whitespace runs to one space, trims and cuts at 200 characters (code points): the
 * notification preview. A cut that ends in a space is trimmed again (never a trailing space).
 */
export function preview(message: string): string {
  const folded = message.replace(/\s+/gu, " ").trim();
  return Array.from(folded).slice(0, PREVIEW_CHARS).join("").trimEnd();
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

/** What a notice's text is made of: its activity item. */
export interface NoticeItem {
  readonly itemType: string;
  readonly authorLabel: string | null;
  readonly message: string;
}

/**
 * The one-line text of a notice for the agent's harness: `[DIRECT] <author>: <preview>` for a
 * DIRECT entry; a notification's own text (`[REPLY] …`, `[STALE] …`) folded and cut the same way.
 */
export function noticeText(item: NoticeItem): string {
  if (item.itemType === "entry") return `[DIRECT] ${item.authorLabel ?? ""}: ${preview(item.message)}`;
  return preview(item.message);
}
