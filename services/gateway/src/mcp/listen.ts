import type { IncomingMessage, ServerResponse } from "node:http";
import { type JSONRPCRequest, MissingRequiredClientCapabilityError } from "@modelcontextprotocol/server";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import {
  checkInboxCursor,
  followInbox,
  INBOX_URI,
  type InboxSeat,
  type InboxWanted,
  inboxOf,
  inboxSeatOf,
} from "./listen-inbox";
import { type ListenDeps, openListenStream, rejectListen } from "./listen-stream";
import { watchTasks } from "./listen-tasks";
import { declaresTasks, type McpTasks, TASKS_EXTENSION, type WatchedTask } from "./tasks";

export type { ListenDeps } from "./listen-stream";

/** Most task ids one listen may name. */
const MAX_TASK_IDS = 100;

/** What a `subscriptions/listen` asks Unimatrix for: the seat's inbox, task notifications, or both. */
export interface ListenWanted {
  readonly inbox?: InboxWanted;
  readonly taskIds?: readonly unknown[];
}

/** What of a `subscriptions/listen` the gateway serves itself; undefined leaves it to the SDK. */
export function listenOf(message: JSONRPCRequest): ListenWanted | undefined {
  const params = message.params as
    | { notifications?: { resourceSubscriptions?: unknown; taskIds?: unknown } }
    | undefined;
  const inbox = inboxOf(params?.notifications?.resourceSubscriptions);
  const taskIds = params?.notifications?.taskIds;
  if (inbox === undefined && !Array.isArray(taskIds)) return undefined;
  return { ...(inbox ? { inbox } : {}), ...(Array.isArray(taskIds) ? { taskIds } : {}) };
}

/** The task ids a listen names, checked: strings, at most `MAX_TASK_IDS`. */
function taskIdsOf(taskIds: readonly unknown[]): string[] {
  if (taskIds.length > MAX_TASK_IDS) {
    throw new InvalidArgumentError("notifications.taskIds", `names at most ${MAX_TASK_IDS} tasks`);
  }
  if (!taskIds.every((id): id is string => typeof id === "string" && id.length > 0 && id.length <= 4096)) {
    throw new InvalidArgumentError("notifications.taskIds", "must be task ids (non-empty strings)");
  }
  return taskIds as string[];
}

/**
 * `subscriptions/listen` (revision 2026-07-28) for what Unimatrix serves itself: the seat's inbox
 * (`unimatrix://inbox`, see `followInbox`) and `notifications/tasks` for the tasks named in
 * `notifications.taskIds` (see `watchTasks`), on one stream. Task notifications need the tasks
 * extension declared in the request's `_meta` (`-32021` otherwise, as the spec says); ids this
 * credential does not own are left out of the acknowledgement. A listen for tasks alone ends with
 * its response once every task has settled; one with the inbox stays open. A revoked bearer or
 * seat ends it at once (the next listen answers 401).
 *
 * Written here rather than through the SDK's listen router: that router fans out server-wide
 * change events, with no seam for a per-listener principal, starting position or task.
 */
export async function serveListen(
  deps: ListenDeps,
  tasks: McpTasks,
  request: IncomingMessage,
  response: ServerResponse,
  message: JSONRPCRequest,
  credentialKey: string,
): Promise<void> {
  const wanted = listenOf(message) ?? {};
  const bearer = request.headers.authorization ?? "";
  let seat: InboxSeat | undefined;
  let watched: WatchedTask[] | undefined;
  try {
    if (wanted.taskIds) {
      if (!declaresTasks(message.params?._meta)) {
        throw new MissingRequiredClientCapabilityError(
          { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
          "Missing required client capability",
        );
      }
      watched = tasks.watchable(credentialKey, taskIdsOf(wanted.taskIds));
    }
    if (wanted.inbox) {
      seat = await inboxSeatOf(deps, request, wanted.inbox);
      await checkInboxCursor(deps, seat, wanted.inbox.after);
    }
  } catch (error) {
    return rejectListen(deps, response, message, error);
  }
  const acknowledged = {
    ...(seat ? { resourceSubscriptions: [INBOX_URI] } : {}),
    ...(watched ? { taskIds: watched.map((task) => task.taskId) } : {}),
  };
  const stream = await openListenStream(
    deps,
    request,
    response,
    message,
    credentialKey,
    acknowledged,
    seat ? [seat] : [],
  );
  if (!stream) return;
  try {
    await Promise.all([
      seat ? followInbox(deps, stream, seat, wanted.inbox?.after) : undefined,
      watched ? watchTasks(deps, tasks, stream, bearer, watched) : undefined,
    ]);
    // Every task settled and no inbox asked: the subscription is complete.
    if (!seat) stream.finish();
  } finally {
    await stream.close();
  }
}
