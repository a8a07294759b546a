import { z } from "zod";
import type { McpSession } from "../session";
import { type WaitFilter, waitForUnread, wakes } from "../wait";
import { threadRoot } from "./refs";
import { unreadResult } from "./render";
import { defineTool, entryRef, items, ok, WRITE } from "./spec";

type WaitInput = { timeout_s?: number; only?: "direct"; thread?: string };

/** The wait's filter (a `thread` resolved to its root entry id). */
async function filterOf(session: McpSession, input: WaitInput, signal: AbortSignal): Promise<WaitFilter> {
  const threadRootId = input.thread !== undefined ? await threadRoot(session, input.thread, signal) : undefined;
  return { direct: input.only === "direct", ...(threadRootId !== undefined ? { threadRootId } : {}) };
}

/**
 * Where a `log_wait` parked as a task starts: after the seat's unread items (looked at, not taken),
 * when none of them is what the wait is for; undefined when one is (the call answers at once).
 */
export async function parkedWait(session: McpSession, input: WaitInput, signal: AbortSignal) {
  const filter = await filterOf(session, input, signal);
  const droneId = session.requireSeat().droneId;
  const backlog = await session.peekUnread(signal);
  if (backlog.items.some((item) => wakes(item, droneId, filter))) return undefined;
  return { from: backlog.cursor, filter, timeoutMs: (input.timeout_s ?? 25) * 1000 };
}

/** `log_wait`: block until something new reaches the seat; returns it like `log_read`. */
export const logWait = defineTool({
  name: "log_wait",
  title: "Wait for activity",
  description: "Wait (default 25 s, max 50) for something new; returns it like log_read.",
  annotations: { ...WRITE, idempotentHint: false },
  input: {
    timeout_s: z.number().int().min(1).max(50).optional(),
    only: z.enum(["direct"]).optional(),
    thread: entryRef.optional().describe("Only this thread"),
  },
  output: { items, more: z.boolean().optional() },
  async run(session, input, signal) {
    const page = await waitForUnread(
      session,
      (input.timeout_s ?? 25) * 1000,
      await filterOf(session, input, signal),
      signal,
    );
    if (!page) return ok("nothing new", { items: [] });
    return unreadResult(session, page, signal);
  },
});
