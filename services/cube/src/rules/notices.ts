/** Notification kinds a drone must not miss: each queues a notice for a drone on a machine. */
export const NOTICE_KINDS: ReadonlySet<string> = new Set(["reply", "claim_stale", "takeover", "unread_nudge"]);
