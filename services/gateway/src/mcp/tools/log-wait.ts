import { z } from "zod";
import { waitForUnread } from "../wait";
import { threadRoot } from "./refs";
import { unreadResult } from "./render";
import { defineTool, entryRef, items, ok, WRITE } from "./spec";

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
    const threadRootId = input.thread !== undefined ? await threadRoot(session, input.thread, signal) : undefined;
    const page = await waitForUnread(
      session,
      (input.timeout_s ?? 25) * 1000,
      { direct: input.only === "direct", ...(threadRootId !== undefined ? { threadRootId } : {}) },
      signal,
    );
    if (!page) return ok("nothing new", { items: [] });
    return unreadResult(session, page, signal);
  },
});
