import type { ActivityItem } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { renderItems } from "./format";
import type { McpSession } from "./session";
import type { TaskState } from "./task-state";
import { viewerFor } from "./tools/render";
import { type WaitFilter, wakes } from "./wait";

/** A parked `log_wait`, sealed into its task id. */
export interface WaitTask {
  readonly k: "w";
  /** The credential that waits (only it may poll). */
  readonly c: string;
  /** The waiting seat's session token. */
  readonly s: string;
  readonly cube: string;
  /** The cube cursor the wait starts after (the inbox as it was when the wait began). */
  readonly f: string;
  /** Only directs (1), or only this thread (its root entry id). */
  readonly d?: 1;
  readonly r?: string;
  /** Created at and the wait's deadline (epoch ms). */
  readonly t: number;
  readonly x: number;
}

/** Most activity one poll scans past the wait's start for what wakes it. */
const SCAN_PAGES = 4;

const filterOf = (task: WaitTask): WaitFilter => ({
  ...(task.d ? { direct: true } : {}),
  ...(task.r !== undefined ? { threadRootId: task.r } : {}),
});

const createdMs = (item: ActivityItem) => {
  const at = item.item.value?.createdAt;
  return at ? Number(at.seconds) * 1000 + Math.floor(at.nanos / 1e6) : 0;
};

/**
 * Where a parked wait stands. It is answered from the log alone, the same on every replica and on
 * every poll: `completed` with the first item after the wait's start that the filter accepts and
 * that was committed before the deadline, or `completed` with nothing once the deadline has
 * passed; `working` before. Polling does not move the drone's inbox (a `tasks/get` has no side
 * effects); the result says so, and `log_read` takes the inbox as usual.
 */
export async function waitState(session: McpSession, task: WaitTask, now: number): Promise<TaskState> {
  const droneId = session.requireSeat().droneId;
  const filter = filterOf(task);
  let cursor = task.f;
  for (let page = 0; page < SCAN_PAGES; page++) {
    const reply = await session.upstreams.activity.readActivity(
      // A peek: polling says what arrived without marking it read (the agent has not seen it yet).
      { cubeId: task.cube, cursor, pageSize: 500, peek: true },
      await session.asActor(),
    );
    const woke = reply.items.find((item) => wakes(item, droneId, filter) && createdMs(item) <= task.x);
    if (woke) {
      const rendered = renderItems([woke], await viewerFor(session, [woke], new AbortController().signal));
      return {
        status: "completed",
        at: createdMs(woke),
        message: "something new arrived",
        result: {
          content: [{ type: "text", text: [...rendered.map((r) => r.line), "(log_read takes your inbox)"].join("\n") }],
          structuredContent: { items: rendered.map((r) => r.data) },
          isError: false,
        },
      };
    }
    cursor = reply.nextCursor || cursor;
    if (!reply.hasMore) break;
  }
  if (now < task.x) return { status: "working", at: task.t, message: "waiting for something new" };
  return {
    status: "completed",
    at: task.x,
    message: "the wait timed out",
    result: { content: [{ type: "text", text: "nothing new" }], structuredContent: { items: [] }, isError: false },
  };
}
