import {
  CLIENT_CAPABILITIES_META_KEY,
  type McpServer,
  ProtocolError,
  ProtocolErrorCode,
} from "@modelcontextprotocol/server";
import { z } from "zod";
import { answerOf } from "../status-table";
import { Sealer } from "./sealer";
import type { McpSession } from "./session";
import { type QuestionTask, questionState } from "./task-question";
import type { TaskState } from "./task-state";
import { type WaitTask, waitState } from "./task-wait";
import type { WaitFilter } from "./wait";

/** The tasks extension of revision 2026-07-28. */
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** How often a host should poll `tasks/get`: people take a while; a parked wait wakes sooner. */
const POLL_QUESTION_MS = 2_000;
const POLL_WAIT_MS = 1_000;
/** How long a task lives: its seat's session lifetime at most (cube's default drone session TTL). */
const TASK_TTL_MS = 24 * 60 * 60 * 1000;

type Task = QuestionTask | WaitTask;

/** The params of `tasks/get`, `tasks/update` and `tasks/cancel`, built once (a server is built per request). */
const TASK_PARAMS = z.object({ taskId: z.string().min(1).max(4096) });
/** `tasks/update` takes the task's other fields too (and ignores them). */
const TASK_UPDATE_PARAMS = TASK_PARAMS.passthrough();

/** True when a request's `_meta` envelope declares the tasks extension among its client capabilities (the spec's opt-in). */
export function declaresTasks(envelope: unknown): boolean {
  const meta = envelope as Record<string, { extensions?: Record<string, unknown> } | undefined> | undefined;
  return meta?.[CLIENT_CAPABILITIES_META_KEY]?.extensions?.[TASKS_EXTENSION] !== undefined;
}

/** True when the tool call being served declared the tasks extension. */
export function wantsTasks(ctx: { mcpReq: { envelope?: unknown } }): boolean {
  return declaresTasks(ctx.mcpReq.envelope);
}

/** A task as a listen watches it: whose seat reads it, in which cube, and until when a wait waits. */
export interface WatchedTask {
  readonly taskId: string;
  readonly seat: string;
  readonly cube: string;
  readonly deadline?: number;
}

/** Where a task stands, as `tasks/get` answers it and `notifications/tasks` carries it. */
export type DetailedTask = Awaited<ReturnType<McpTasks["detail"]>>;

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Tasks of the 2026-07-28 tasks extension, for a host that declared it: a question to the cube's
 * humans (`log_post` with `ask_human`) and a `log_wait` with nothing to return yet answer with a
 * task handle instead of holding the call, and `tasks/get` — on any gateway — reports `working`
 * until the question is answered or something arrives for the wait, then `completed` with the
 * tool's result. The task id is the task itself, sealed with the fleet's key (the credential, the
 * seat, what it waits for): nothing is stored, so every replica answers for every task and a
 * restart loses none. Every answer is read from cube through the task's seat (a revoked seat
 * fails the task).
 */
export class McpTasks {
  readonly #sealer: Sealer;

  constructor(
    internalKey: string,
    /** The clock every task time is read from (a wait's deadline, `lastUpdatedAt`). */
    readonly now: () => number = Date.now,
  ) {
    this.#sealer = new Sealer(internalKey, "unimatrix mcp task");
  }

  /** The task handle (a `CreateTaskResult`) for the question `entry` the seat just asked. */
  question(session: McpSession, entry: { id: string; n: number }) {
    const seat = session.requireSeat();
    const t = this.now();
    const task: QuestionTask = {
      c: session.record.credentialKey,
      s: seat.token,
      cube: seat.cubeId,
      e: entry.id,
      n: entry.n,
      t,
    };
    return {
      ...this.#created(task),
      statusMessage: `asked the cube's humans as #${entry.n}; waiting for an answer`,
      // The question's handle, as log_post answers it (the tool's output schema).
      content: [],
      structuredContent: { n: entry.n, id: entry.id },
    };
  }

  /** The task handle for a wait from `from` (a cube cursor) until `timeoutMs` from now. */
  wait(session: McpSession, from: string, filter: WaitFilter, timeoutMs: number) {
    const seat = session.requireSeat();
    const t = this.now();
    const task: WaitTask = {
      k: "w",
      c: session.record.credentialKey,
      s: seat.token,
      cube: seat.cubeId,
      f: from,
      ...(filter.direct ? { d: 1 as const } : {}),
      ...(filter.threadRootId !== undefined ? { r: filter.threadRootId } : {}),
      t,
      x: t + timeoutMs,
    };
    // The SDK checks a tool's answer against its output schema, a task handle too: no items yet.
    return {
      ...this.#created(task),
      statusMessage: "waiting for something new",
      content: [],
      structuredContent: { items: [] },
    };
  }

  /** Registers `tasks/get`, `tasks/update` and `tasks/cancel` on a 2026-07-28 server built for one request. */
  register(server: McpServer, session: McpSession): void {
    const params = TASK_PARAMS;
    server.server.setRequestHandler("tasks/get", { params }, async ({ taskId }) => this.detail(session, taskId));
    // Nothing to update: no task here ever asks the client anything.
    server.server.setRequestHandler("tasks/update", { params: TASK_UPDATE_PARAMS }, async ({ taskId }) => {
      this.#open(session, taskId);
      return {};
    });
    // Cooperative cancel: a question once asked stays asked (people may still answer it) and a
    // wait holds nothing; the acknowledgement is all the spec asks, and the task goes on
    // reporting what cube knows.
    server.server.setRequestHandler("tasks/cancel", { params }, async ({ taskId }) => {
      this.#open(session, taskId);
      return {};
    });
  }

  #created(task: Task) {
    return {
      resultType: "task",
      ...this.#handle(this.#sealer.seal(JSON.stringify(task)), task, task.t),
      status: "working",
    };
  }

  /** The tasks among `taskIds` that credential `credentialKey` owns (the others are unknown to it). */
  watchable(credentialKey: string, taskIds: readonly string[]): WatchedTask[] {
    return taskIds.flatMap((taskId) => {
      const task = this.#unseal(credentialKey, taskId);
      if (!task) return [];
      return [{ taskId, seat: task.s, cube: task.cube, ...(task.k === "w" ? { deadline: task.x } : {}) }];
    });
  }

  #unseal(credentialKey: string, taskId: string): Task | undefined {
    let task: Task | undefined;
    try {
      task = JSON.parse(this.#sealer.unseal(taskId)) as Task;
    } catch {
      return undefined;
    }
    // Another credential's task is as unknown as a made-up id.
    return task.c === credentialKey ? task : undefined;
  }

  #open(session: McpSession, taskId: string): Task {
    const task = this.#unseal(session.record.credentialKey, taskId);
    if (!task) throw new ProtocolError(ProtocolErrorCode.InvalidParams, "taskId: unknown task");
    return task;
  }

  #handle(taskId: string, task: Task, updated: number) {
    return {
      taskId,
      createdAt: iso(task.t),
      lastUpdatedAt: iso(updated),
      ttlMs: TASK_TTL_MS,
      pollIntervalMs: task.k === "w" ? POLL_WAIT_MS : POLL_QUESTION_MS,
    };
  }

  /** Where task `taskId` stands now, read from cube through its seat (`tasks/get`'s answer). */
  async detail(session: McpSession, taskId: string) {
    const task = this.#open(session, taskId);
    try {
      await session.useSeat(task.s);
      const state: TaskState =
        task.k === "w" ? await waitState(session, task, this.now()) : await questionState(session, task, this.now());
      return {
        ...this.#handle(taskId, task, state.at),
        status: state.status,
        statusMessage: state.message,
        ...(state.result ? { result: state.result } : {}),
      };
    } catch (error) {
      // The seat was revoked or what it waits on is gone: the task failed, saying why (a JSON-RPC error shape).
      const { message, row } = answerOf(error, session.deps.logger, "mcp tasks/get");
      return {
        ...this.#handle(taskId, task, this.now()),
        status: "failed",
        statusMessage: `${row.grpcName}: ${message}`,
        error: { code: row.rpc, message: `${row.grpcName}: ${message}` },
      };
    }
  }
}
