import { follow } from "../follow";
import { upstreamMetadata } from "../forward";
import type { ListenDeps, ListenStream } from "./listen-stream";
import { activityStep } from "./push";
import { McpSession } from "./session";
import type { DetailedTask, McpTasks, WatchedTask } from "./tasks";

/**
 * How often a watched task is read again when nothing in its cube has moved: what wakes a task is
 * cube activity its seat sees (read at once), and the deadline of a wait (timed); this catches
 * anything neither shows, at the pace a polling host would have used.
 */
const BACKSTOP_MS = 2_000;

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

/** What changes a task's notification (not `lastUpdatedAt`, which a working question restamps). */
const shapeOf = (task: DetailedTask) =>
  JSON.stringify([
    task.status,
    task.statusMessage,
    "result" in task ? task.result : undefined,
    "error" in task ? task.error : undefined,
  ]);

/**
 * `notifications/tasks` for the tasks a listen named: one at once with where each stands, then one
 * each time that changes, each the complete task exactly as `tasks/get` would answer it then, until
 * every task is completed or failed (then it returns) or the listen ends. Nothing is stored: a task
 * is read from cube through its own seat, woken by that cube's activity (followed as the seat, from
 * now), by a wait's deadline, and by a slow backstop, so a listen on any replica reports every task
 * of its credential and a listen reopened anywhere starts with the current state.
 */
export async function watchTasks(
  deps: ListenDeps,
  tasks: McpTasks,
  stream: ListenStream,
  authorization: string,
  watched: readonly WatchedTask[],
): Promise<void> {
  const credentialKey = deps.auth.credentialKeyOf(authorization) ?? "";
  // One session per task, acting as the bearer; each read re-checks the task's seat (`tasks.detail`).
  const open = new Map(
    watched.map((task) => [
      task.taskId,
      { session: new McpSession(deps, { credentialKey }, authorization, async () => undefined), shape: "" },
    ]),
  );
  let wake: () => void = () => {};
  let dirty = true;
  const poke = () => {
    dirty = true;
    wake();
  };
  const timers = watched.flatMap((task) =>
    task.deadline === undefined ? [] : [setTimeout(poke, Math.max(0, task.deadline - tasks.now()) + 5)],
  );
  const backstop = setInterval(poke, BACKSTOP_MS);
  const stopped = new AbortController();
  const signal = AbortSignal.any([stream.signal, stopped.signal]);
  signal.addEventListener("abort", () => wake(), { once: true });
  // One follow per seat and cube among the tasks: any activity there may have settled one of them.
  const seats = new Map(watched.map((task) => [`${task.cube} ${task.seat}`, task]));
  for (const task of seats.values()) void wakeOnActivity(deps, task, signal, poke);
  try {
    while (!signal.aborted && open.size > 0) {
      if (!dirty) await new Promise<void>((resolve) => (wake = resolve));
      dirty = false;
      for (const [taskId, entry] of open) {
        if (signal.aborted) break;
        const detail = await tasks.detail(entry.session, taskId);
        const shape = shapeOf(detail);
        if (shape !== entry.shape) {
          entry.shape = shape;
          stream.notify("notifications/tasks", detail);
        }
        if (TERMINAL.has(detail.status)) open.delete(taskId);
      }
    }
  } finally {
    stopped.abort();
    clearInterval(backstop);
    for (const timer of timers) clearTimeout(timer);
  }
}

/** Pokes the watcher on every event of the task's cube its seat sees, until `signal` (or the seat stops authenticating). */
async function wakeOnActivity(deps: ListenDeps, task: WatchedTask, signal: AbortSignal, poke: () => void) {
  const authorization = `Bearer ${task.seat}`;
  try {
    for await (const _ of follow({
      after: undefined,
      signal,
      step: activityStep,
      open: async (from) => {
        const { principal } = await deps.auth.authenticate(authorization);
        const call = deps.upstreams.activity.subscribeActivity(
          { cubeId: task.cube, ...(from !== undefined ? { after: from } : {}) },
          { metadata: upstreamMetadata(deps.internalKey, principal), signal },
        );
        // Subscribed: whatever happened before is in the log, so read the tasks once more.
        poke();
        return call;
      },
    })) {
      poke();
    }
  } catch {
    // The seat stopped authenticating (or the listen ended): the next read reports the task failed.
    poke();
  }
}
