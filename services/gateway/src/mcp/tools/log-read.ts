import type { ActivityItem } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { z } from "zod";
import { renderEntry } from "../format";
import type { McpSession } from "../session";
import { entryFields } from "./refs";
import { itemsResult, unreadResult, viewerFor } from "./render";
import { defineTool, entryRef, items, ok, pageSize, WRITE } from "./spec";

/** `log_read`: unread items (the default), the history from a cursor, or one thread. */
export const logRead = defineTool({
  name: "log_read",
  title: "Read the log",
  description: "Your unread items (≤300, summary first); cursor: the history; thread: one thread.",
  annotations: { ...WRITE, idempotentHint: false },
  input: {
    unread: z.boolean().optional(),
    cursor: z.string().max(1024).optional().describe('"" = from the start'),
    thread: entryRef.optional().describe("Read this entry's thread"),
    page_size: pageSize,
  },
  output: { items, more: z.boolean().optional(), cursor: z.string().optional() },
  async run(session, input, signal) {
    if (input.thread !== undefined) return threadResult(session, input.thread, input.page_size, signal);
    if (input.unread ?? input.cursor === undefined) {
      return unreadResult(session, await session.readUnread(input.page_size, signal), signal);
    }
    const reply = await session.upstreams.activity.readActivity(
      { cubeId: session.cubeId(), cursor: input.cursor ?? "", pageSize: input.page_size ?? 0 },
      await session.asActor(signal),
    );
    return itemsResult(
      session,
      reply.items,
      reply.hasMore ? `more: log_read cursor ${reply.nextCursor}` : undefined,
      { cursor: reply.nextCursor, ...(reply.hasMore ? { more: true } : {}) },
      signal,
      (rendered) => `${rendered.length} item(s)`,
    );
  },
});

/** `log_read` with `thread`: the root and its replies, one line each (ReadThread marks them read). */
async function threadResult(session: McpSession, ref: string, pageSize: number | undefined, signal: AbortSignal) {
  const reply = await session.upstreams.activity.readThread(
    { cubeId: session.cubeId(), ...entryFields(ref), pageSize: pageSize ?? 0 },
    await session.asActor(signal),
  );
  const entries = [...(reply.root ? [reply.root] : []), ...reply.replies];
  const list = entries.map((value) => ({ item: { case: "entry" as const, value } }) as ActivityItem);
  const viewer = await viewerFor(session, list, signal);
  const positions = new Map(entries.map((e) => [e.id, Number(e.position)]));
  const rendered = entries.map((e) => renderEntry(e, viewer, positions));
  const lines = [
    `thread of #${rendered[0]?.data.n ?? "?"}: ${reply.replies.length} repl(ies)`,
    ...rendered.map((r) => r.line),
  ];
  if (reply.nextPageToken) lines.push("more replies: log_read thread again with a larger page_size");
  return ok(lines.join("\n"), { items: rendered.map((r) => r.data), ...(reply.nextPageToken ? { more: true } : {}) });
}
