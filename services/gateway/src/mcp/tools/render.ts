import type { ActivityItem } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { renderItems, summaryLine, unlabelled, type Viewer } from "../format";
import type { McpSession, UnreadPage } from "../session";
import { listDrones } from "./refs";
import { ok } from "./spec";

/** Rendering context for the seat: its drone and the labels of the drones the items name. */
export async function viewerFor(
  session: McpSession,
  list: readonly ActivityItem[],
  signal: AbortSignal,
): Promise<Viewer> {
  const droneId = session.record.seat?.droneId;
  const base: Viewer = { droneId, labels: new Map() };
  if (unlabelled(list, base).length === 0) return base;
  const drones = await listDrones(session, undefined, signal);
  return { droneId, labels: new Map(drones.map((d) => [d.id, d.label])) };
}

/** The text and structured result of a list of activity items (a read, a wait). */
export async function itemsResult(
  session: McpSession,
  list: ActivityItem[],
  head: string | undefined,
  tail: Record<string, unknown>,
  signal: AbortSignal,
  summarize: (rendered: ReturnType<typeof renderItems>) => string,
) {
  const rendered = renderItems(list, await viewerFor(session, list, signal));
  const lines = [summarize(rendered), ...rendered.map((r) => r.line)];
  if (head) lines.push(head);
  return ok(lines.join("\n"), { items: rendered.map((r) => r.data), ...tail });
}

/**
 * How many decisions were recorded since the oldest item of `page` (a catch-up's summary line),
 * from the decisions read beside it, else read now.
 */
async function decisionsSince(session: McpSession, page: UnreadPage, signal: AbortSignal) {
  const times = page.items.flatMap(({ item }) => (item.value?.createdAt ? [Number(item.value.createdAt.seconds)] : []));
  if (times.length === 0) return 0;
  const since = Math.min(...times);
  const decisions = page.decisions ?? (await session.latestDecisions(signal));
  return decisions.filter((d) => Number(d.createdAt?.seconds ?? 0) >= since).length;
}

/** The result of an unread page (a catch-up read, a wait): summary line first, then one line per item. */
export async function unreadResult(session: McpSession, page: UnreadPage, signal: AbortSignal) {
  const decisions = page.items.length > 0 ? await decisionsSince(session, page, signal) : 0;
  return itemsResult(session, page.items, undefined, page.hasMore ? { more: true } : {}, signal, (rendered) =>
    summaryLine(rendered, page.hasMore, { decisions }),
  );
}
