import type { ActivityLog } from "./activity-log";
import { ApiError, CUBE, type Entry, type Notification, rpc } from "./api";
import { type EventStream, openEventStream, type StreamState } from "./events";

/** What the feed needs from its cube view. */
export interface ActivityFeedOptions {
  readonly cubeId: string;
  /** The token the log is read and streamed with (the seat's session, else the signed-in token). */
  readonly actor: () => string;
  readonly log: ActivityLog;
  /** The seat's notifications card: past notifications are listed there, and cleared on a restart. */
  readonly notices: { add(notification: Notification): void; clear(): void };
  /** An entry from the stream. */
  readonly entry: (entry: Entry) => void;
  /** A notification from the stream. */
  readonly notification: (notification: Notification) => void;
  /** Whether a seat is taken (its session can end under the feed). */
  readonly seated: () => boolean;
  /** The seat's session ended (expired, revoked): leave the seat and say why. */
  readonly seatEnded: (message: string) => void;
  readonly setStreamState: (state: StreamState, detail: string) => void;
  readonly showError: (error: unknown) => void;
}

/**
 * Keeps the activity list in step with the cube: reads the retained log (as the current viewer),
 * then follows the cube's event stream from there; read again from the start when the viewer
 * changes (a seat taken or left).
 */
export function activityFeed(options: ActivityFeedOptions) {
  const { cubeId, actor, log, notices } = options;
  let stream: EventStream | undefined;
  let disposed = false;

  /** Reads the retained log (as the current viewer) and returns the cursor to stream from. */
  async function backfill(): Promise<string> {
    let cursor = "";
    for (let page = 0; page < 20; page++) {
      const answer = await rpc<{
        items?: { entry?: Entry; notification?: Notification }[];
        nextCursor?: string;
        hasMore?: boolean;
      }>(`${CUBE}.ActivityService/ReadActivity`, { cubeId, cursor, pageSize: 500 }, actor());
      for (const item of answer.items ?? []) {
        // Entries come with their current acks and claim; past notifications are only listed.
        if (item.entry) log.upsert(item.entry);
        else if (item.notification) notices.add(item.notification);
      }
      cursor = answer.nextCursor || cursor;
      if (!answer.hasMore) break;
    }
    return cursor;
  }

  function dropSeat(message: string) {
    const stale = stream;
    queueMicrotask(() => {
      if (stream !== stale || !options.seated()) return;
      options.seatEnded(message);
    });
  }

  function startStream(after: string) {
    stream = openEventStream({
      path: `/v1/cubes/${encodeURIComponent(cubeId)}/events`,
      token: actor,
      lastEventId: after,
      readyEvents: ["ready"],
      terminalEvents: ["access_revoked"],
      onState: (state, detail) => {
        options.setStreamState(state, detail);
        // A seat session that expired or was revoked: fall back to the signed-in token.
        if (state === "ended" && options.seated()) dropSeat(`Your seat ended: ${detail}`);
      },
      onEvent: (type, data) => {
        if (type === "entry") options.entry(data as Entry);
        else if (type === "notification") options.notification(data as Notification);
        // Retention pruned what followed the stream's cursor: the list has holes, read it again.
        else if (type === "reset") queueMicrotask(restart);
        else if (type === "access_revoked") {
          const reason = (data as { reason?: string }).reason || "access revoked";
          options.setStreamState("ended", reason);
          if (options.seated()) dropSeat(`Your seat ended: ${reason}`);
        }
      },
    });
  }

  /** Reads everything again as the current viewer (the stream resumes where it was if the read is empty). */
  function restart() {
    const after = stream?.lastEventId() ?? "";
    stream?.close();
    log.clear();
    notices.clear();
    void backfill().then(
      (cursor) => !disposed && startStream(cursor || after),
      (e) => {
        if (options.seated() && e instanceof ApiError && e.code === "unauthenticated")
          dropSeat("Your seat session ended");
        else options.showError(e);
      },
    );
  }

  return {
    /** The first read: the retained log, then the stream from its end. */
    async open() {
      const cursor = await backfill();
      if (!disposed) startStream(cursor);
    },
    restart,
    dispose() {
      disposed = true;
      stream?.close();
    },
  };
}
