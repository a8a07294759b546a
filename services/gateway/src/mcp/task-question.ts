import type { Entry } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { renderEntry } from "./format";
import type { McpSession } from "./session";
import type { TaskState } from "./task-state";

/** A question to the cube's humans, sealed into its task id. */
export interface QuestionTask {
  readonly k?: "q";
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

/**
 * Where a question stands: `working` until cube says it is answered (`Entry.answer_entry_id`, read
 * through the asking seat), then `completed` with the answer's line as the tool result.
 */
export async function questionState(session: McpSession, task: QuestionTask, now: number): Promise<TaskState> {
  const { root, replies } = await session.upstreams.activity.readThread(
    { cubeId: task.cube, entryId: task.e },
    await session.asActor(),
  );
  if (!root?.answerEntryId) {
    return { status: "working", at: now, message: `waiting for the cube's humans to answer #${task.n}` };
  }
  const answer: Entry | undefined = replies.find((reply) => reply.id === root.answerEntryId);
  const line = answer
    ? renderEntry(answer, { droneId: session.record.seat?.droneId, labels: new Map() }).line
    : `#${task.n} was answered (the answer is not visible to this seat)`;
  return {
    status: "completed",
    at: answer?.createdAt ? Number(answer.createdAt.seconds) * 1000 : now,
    message: `answered #${task.n}`,
    result: {
      content: [{ type: "text", text: `answer to #${task.n}: ${line}` }],
      structuredContent: answer ? { n: Number(answer.position), id: answer.id } : { n: task.n, id: task.e },
      isError: false,
    },
  };
}
