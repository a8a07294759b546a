import {
  CLIENT_CAPABILITIES_META_KEY,
  type McpServer,
  ProtocolError,
  ProtocolErrorCode,
} from "@modelcontextprotocol/server";
import type { Entry } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { z } from "zod";
import { answerOf } from "../status-table";
import { renderEntry } from "./format";
import { Sealer } from "./sealer";
import type { McpSession } from "./session";

/** The tasks extension of revision 2026-07-28. */
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** How often a host should poll `tasks/get` for a question (people take a while). */
const POLL_INTERVAL_MS = 2_000;
/** How long a question task lives: its seat's session lifetime at most (cube's default drone session TTL). */
const TASK_TTL_MS = 24 * 60 * 60 * 1000;

/** What a question task is: everything `tasks/get` needs, sealed into its id (no task store). */
interface QuestionTask {
  /** The credential that asked (only it may poll). */
  readonly c: string;
  /** The asking seat's session token. */
  readonly s: string;
  readonly cube: string;
  /** The question entry and its position. */
  readonly e: string;
  readonly n: number;
  /** Created at (epoch ms). */
  readonly t: number;
}

/** True when the request declared the tasks extension among its client capabilities (the spec's opt-in). */
export function wantsTasks(ctx: { mcpReq: { envelope?: unknown } }): boolean {
  const envelope = ctx.mcpReq.envelope as
    | Record<string, { extensions?: Record<string, unknown> } | undefined>
    | undefined;
  return envelope?.[CLIENT_CAPABILITIES_META_KEY]?.extensions?.[TASKS_EXTENSION] !== undefined;
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Questions to the cube's humans as tasks (the 2026-07-28 tasks extension): a `log_post` with
 * `ask_human` from a host that declared the extension answers with a task handle instead of
 * waiting, and `tasks/get` — on any gateway — reports `working` until a person answers, then
 * `completed` with the answer as the tool result. The task id is the task itself, sealed with the
 * fleet's key (the asking credential, the seat, the question): nothing is stored, so every replica
 * answers for every task and a restart loses none. Whether the question is answered is cube's
 * rule (`Entry.answer_entry_id`), read through the asking seat (a revoked seat fails the task).
 */
export class QuestionTasks {
  readonly #sealer: Sealer;

  constructor(
    internalKey: string,
    private readonly now: () => number = Date.now,
  ) {
    this.#sealer = new Sealer(internalKey, "unimatrix mcp task");
  }

  /** The task handle (a `CreateTaskResult`) for the question `entry` the seat just asked. */
  create(session: McpSession, entry: { id: string; n: number }) {
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
      resultType: "task",
      ...this.#state(this.#sealer.seal(JSON.stringify(task)), task, t),
      status: "working",
      statusMessage: `asked the cube's humans as #${entry.n}; waiting for an answer`,
      // The question's handle, as log_post answers it (the tool's output schema).
      content: [],
      structuredContent: { n: entry.n, id: entry.id },
    };
  }

  /** Registers `tasks/get`, `tasks/update` and `tasks/cancel` on a 2026-07-28 server built for one request. */
  register(server: McpServer, session: McpSession): void {
    const params = z.object({ taskId: z.string().min(1).max(4096) });
    server.server.setRequestHandler("tasks/get", { params }, async ({ taskId }) => this.#get(session, taskId));
    // Nothing to update: a question task never asks the client anything.
    server.server.setRequestHandler("tasks/update", { params: params.passthrough() }, async ({ taskId }) => {
      this.#open(session, taskId);
      return {};
    });
    // Cooperative cancel: a question once asked stays asked (people may still answer it); the
    // acknowledgement is all the spec asks, and the task goes on reporting what cube knows.
    server.server.setRequestHandler("tasks/cancel", { params }, async ({ taskId }) => {
      this.#open(session, taskId);
      return {};
    });
  }

  #open(session: McpSession, taskId: string): QuestionTask {
    let task: QuestionTask | undefined;
    try {
      task = JSON.parse(this.#sealer.unseal(taskId)) as QuestionTask;
    } catch {
      task = undefined;
    }
    // Another credential's task is as unknown as a made-up id.
    if (!task || task.c !== session.record.credentialKey) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, "taskId: unknown task");
    }
    return task;
  }

  #state(taskId: string, task: QuestionTask, updated: number) {
    return {
      taskId,
      createdAt: iso(task.t),
      lastUpdatedAt: iso(updated),
      ttlMs: TASK_TTL_MS,
      pollIntervalMs: POLL_INTERVAL_MS,
    };
  }

  async #get(session: McpSession, taskId: string) {
    const task = this.#open(session, taskId);
    try {
      await session.useSeat(task.s);
      const { root, replies } = await session.upstreams.activity.readThread(
        { cubeId: task.cube, entryId: task.e },
        await session.asActor(),
      );
      if (!root?.answerEntryId) {
        return {
          ...this.#state(taskId, task, this.now()),
          status: "working",
          statusMessage: `waiting for the cube's humans to answer #${task.n}`,
        };
      }
      const answer: Entry | undefined = replies.find((reply) => reply.id === root.answerEntryId);
      const at = answer?.createdAt ? Number(answer.createdAt.seconds) * 1000 : this.now();
      const line = answer
        ? renderEntry(answer, { droneId: session.record.seat?.droneId, labels: new Map() }).line
        : `#${task.n} was answered (the answer is not visible to this seat)`;
      return {
        ...this.#state(taskId, task, at),
        status: "completed",
        statusMessage: `answered #${task.n}`,
        result: {
          content: [{ type: "text", text: `answer to #${task.n}: ${line}` }],
          structuredContent: answer ? { n: Number(answer.position), id: answer.id } : { n: task.n, id: task.e },
          isError: false,
        },
      };
    } catch (error) {
      // The seat was revoked or the question is gone: the task failed, saying why (a JSON-RPC error shape).
      const { message, row } = answerOf(error, session.deps.logger, "mcp tasks/get");
      return {
        ...this.#state(taskId, task, this.now()),
        status: "failed",
        statusMessage: `${row.grpcName}: ${message}`,
        error: { code: row.rpc, message: `${row.grpcName}: ${message}` },
      };
    }
  }
}
