import { status } from "@grpc/grpc-js";
import type { SubscribeActivityResponse } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import {
  type ActivityItem,
  type Entry,
  NotificationKind,
  Visibility,
} from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { DomainError } from "@unimatrix/service-kit/errors";
import { toStatus } from "@unimatrix/service-kit/grpc";
import { follow } from "../follow";
import { activityStep } from "./push";
import type { McpSession, UnreadPage } from "./session";

/** What a wait may be limited to (unset: anything visible). */
export interface WaitFilter {
  /** Only entries addressed directly to the drone (and pings asking it to speak). */
  readonly direct?: boolean;
  /** Only entries of the thread with this root entry id. */
  readonly threadRootId?: string;
}

/** True when `item` (not the drone's own) is what the wait is for. */
export function wakes(item: ActivityItem, droneId: string, filter: WaitFilter): boolean {
  if (item.item.case === "entry") {
    const entry: Entry = item.item.value;
    if (entry.author?.droneId === droneId) return false;
    if (filter.threadRootId !== undefined) {
      return (
        entry.threadRootEntryId === filter.threadRootId ||
        entry.replyToEntryId === filter.threadRootId ||
        entry.id === filter.threadRootId
      );
    }
    if (filter.direct) return entry.visibility === Visibility.DIRECT && entry.recipientDroneIds.includes(droneId);
    return true;
  }
  if (item.item.case === "notification") {
    const kind = item.item.value.kind;
    if (filter.threadRootId !== undefined) return false;
    if (filter.direct) return kind === NotificationKind.HEARTBEAT_PING || kind === NotificationKind.UNREAD_NUDGE;
    return true;
  }
  return false;
}

const itemOf = ({ event }: SubscribeActivityResponse): ActivityItem | undefined =>
  event.case === "entry" || event.case === "notification"
    ? ({ item: { case: event.case, value: event.value } } as ActivityItem)
    : undefined;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });

/**
 * `log_wait`: blocks until something the filter accepts is visible to the seat's drone past its
 * inbox position, then returns the drone's unread items (everything returned is what `log_read`
 * would have returned, so nothing is ever skipped); undefined when the time is up first.
 *
 * No state of this replica is needed and the push stream plays no part: the wait reads the inbox
 * (`ReadUnread`, which also gives the new inbox position) and then follows a short-lived
 * `SubscribeActivity` from exactly that position, so an entry committed at any moment after the
 * read — on any replica — wakes it. With a filter the inbox is not read first (that would consume
 * what the filter leaves for later): the subscription starts at the inbox position the session
 * last learned (or, when it has learned none, past a look at the inbox that takes nothing), and on
 * a wake the whole inbox is read and returned. When the drone's stream cap is
 * reached the wait polls `ReadActivity` from the same position instead.
 */
export async function waitForUnread(
  session: McpSession,
  timeoutMs: number,
  filter: WaitFilter,
  signal: AbortSignal,
): Promise<UnreadPage | undefined> {
  const seat = session.requireSeat();
  const filtered = filter.direct === true || filter.threadRootId !== undefined;
  let from = filtered ? session.record.inbox : undefined;
  if (from === undefined && filtered) {
    // Look at what waits without taking it: what the filter does not want stays unread for later.
    const backlog = await session.peekUnread(signal);
    if (backlog.items.some((item) => wakes(item, seat.droneId, filter))) return session.readUnreadToRender(signal);
    // The rest of a long backlog arrives first on the subscription from there.
    from = backlog.cursor;
  } else if (from === undefined) {
    const page = await session.readUnread(undefined, signal);
    if (page.items.length > 0) return page;
    from = page.cursor;
  }
  const done = new AbortController();
  const timer = setTimeout(() => done.abort(), timeoutMs);
  const stop = AbortSignal.any([done.signal, signal]);
  try {
    // On a wake, read the inbox: the wake may be something another session of the drone has read
    // already (then keep waiting; everything the read returns is returned).
    const onWake = async () => {
      const page = await session.readUnreadToRender(signal);
      return page.items.length > 0 ? page : undefined;
    };
    try {
      for await (const { message } of follow({
        after: from,
        signal: stop,
        step: activityStep,
        open: async (after) =>
          session.upstreams.activity.subscribeActivity(
            { cubeId: seat.cubeId, ...(after !== undefined ? { after } : {}) },
            { ...(await session.asActorFor(timeoutMs + 5_000)), signal: stop },
          ),
      })) {
        const { event } = message;
        if (event.case === "ready") session.deps.onWaitEvent?.("listening");
        if (event.case === "accessRevoked") {
          throw new DomainError(status.UNAUTHENTICATED, `the seat's access was revoked (${event.value.reason})`);
        }
        const item = itemOf(message);
        if (item && wakes(item, seat.droneId, filter)) {
          const page = await onWake();
          if (page) {
            session.deps.onWaitEvent?.("woken");
            return page;
          }
        }
        if (item) session.deps.onWaitEvent?.("passed");
      }
      return undefined;
    } catch (error) {
      if (stop.aborted && !(error instanceof DomainError)) return undefined;
      if (toStatus(error).code !== status.RESOURCE_EXHAUSTED) throw error;
    }
    // The drone holds as many streams as it may (its push streams): poll instead, from the same place.
    let after = from;
    while (!stop.aborted) {
      const page = await session.upstreams.activity.readActivity(
        { cubeId: seat.cubeId, cursor: after, pageSize: 500, peek: true },
        await session.asActor(signal),
      );
      if (page.items.some((item) => wakes(item, seat.droneId, filter))) {
        const read = await onWake();
        if (read) return read;
      }
      after = page.nextCursor;
      if (!page.hasMore) await sleep(1_000, stop);
    }
    return undefined;
  } finally {
    clearTimeout(timer);
    done.abort();
  }
}
