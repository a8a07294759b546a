import type { IncomingMessage, ServerResponse } from "node:http";
import { status } from "@grpc/grpc-js";
import type { LoggingLevel } from "@modelcontextprotocol/sdk/types.js";
import type { SubscribeActivityResponse } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import type { ActivityItem } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import type { Principal } from "@unimatrix/service-kit/auth";
import { toStatus } from "@unimatrix/service-kit/grpc";
import { activityShare, activityWhat, edgeMember, mayReadCube, openActivity } from "../activity-share";
import type { CredentialDoors } from "../doors";
import { follow, type Step } from "../follow";
import { upstreamMetadata } from "../forward";
import { type SharedUpstreams, sharingKey, subjectsOf } from "../shared-upstream";
import { STREAM_HEADERS } from "../sse-headers";
import { PRUNED, renderItems } from "./format";
import type { McpSessionDeps } from "./session";
import type { SeatRecord, SessionRecord } from "./session-store";

/** What the push stream needs. */
export interface PushDeps extends McpSessionDeps {
  /** Shared upstream subscriptions: a push from the head shares one with the drone's other readers (SSE, other sessions). */
  readonly shared?: SharedUpstreams;
  /** How often an open push stream re-reads its session (a seat attached elsewhere, the session ended). */
  readonly pollMs?: number;
  readonly onStream?: (delta: 1 | -1) => void;
  readonly onResume?: () => void;
  /** Ends the push with a final notice when the session's or the seat's credential stops authenticating. */
  readonly doors?: CredentialDoors;
}

const LEVELS: readonly LoggingLevel[] = [
  "debug",
  "info",
  "notice",
  "warning",
  "error",
  "critical",
  "alert",
  "emergency",
];
/** True when a message at `level` passes the session's `logging/setLevel`. */
const allowed = (level: LoggingLevel, record: SessionRecord) =>
  LEVELS.indexOf(level) >= LEVELS.indexOf(record.logLevel ?? "debug");

/** The `retry` the push stream announces: a dropped stream is reopened after a second. */
const RECONNECT_MS = 1000;

const sameSeat = (a: SeatRecord | undefined, b: SeatRecord | undefined) =>
  a?.cubeId === b?.cubeId && a?.droneId === b?.droneId && a?.token === b?.token;

function notification(level: LoggingLevel, data: unknown) {
  return { jsonrpc: "2.0", method: "notifications/message", params: { level, logger: "unimatrix", data } };
}

/**
 * How an activity stream event moves the resume position (shared with `log_wait`): as for SSE,
 * except that every close resumes from its cursor — shutting down or cut as slow, the agent never sees it.
 */
export const activityStep = (message: SubscribeActivityResponse): Step => {
  const { event } = message;
  if (event.case !== "closed") return activityShare.step(message);
  return { goingAway: true, ...(event.value.cursor ? { cursor: event.value.cursor } : {}) };
};

/**
 * `GET /mcp`: the session's push stream, served by any replica. It follows the attached drone's
 * activity and sends each entry and notification as an MCP logging notification whose SSE event
 * id is the drone's cube cursor; reopened anywhere with `Last-Event-ID` it resumes right after it
 * (no gap, no duplicate: the database is the truth). Before a seat is attached — possibly through
 * another replica — it waits, re-reading the session, then starts where the seat started. Opened
 * without `Last-Event-ID` on a seated session it starts at the head (`log_read` catches up). A revoked seat or credential gets a final
 * notice, then the stream ends.
 */
export async function servePush(
  deps: PushDeps,
  request: IncomingMessage,
  response: ServerResponse,
  id: string,
  record: SessionRecord,
  /** The session's bearer as resolved for this request (its tags let credential news name it). */
  bearer?: Principal,
): Promise<void> {
  const closed = new AbortController();
  request.once("close", () => closed.abort());
  response.writeHead(200, {
    "content-type": "text/event-stream",
    ...STREAM_HEADERS,
    "mcp-session-id": id,
  });
  const write = (text: string) => {
    if (!closed.signal.aborted) response.write(text);
  };
  // How long a client waits before reopening a dropped stream (with Last-Event-ID).
  write(`retry: ${RECONNECT_MS}\n\n`);
  const send = (level: LoggingLevel, data: unknown, eventId?: string) => {
    if (!allowed(level, current)) return;
    write(
      `event: message\n${eventId !== undefined ? `id: ${eventId}\n` : ""}data: ${JSON.stringify(notification(level, data))}\n\n`,
    );
  };
  const given = request.headers["last-event-id"];
  let lastEventId = typeof given === "string" && given.length > 0 ? given : undefined;
  let current = record;
  let seatStarted = false;
  let following: AbortController | undefined;
  let ended = false;
  const end = () => {
    ended = true;
    following?.abort();
    closed.abort();
    response.end();
  };
  // The bearer's door, and the seat's while one is followed: a revoked credential ends the push at once.
  const revokedNotice = () => {
    if (ended) return;
    send("warning", { event: "access_revoked", message: "the credential or seat was revoked; attach again" });
    end();
  };
  const shutBearer = deps.doors?.open(request.headers.authorization, bearer, revokedNotice);
  let shutSeat: (() => void) | undefined;
  const pollMs = deps.pollMs ?? 500;
  let sinceComment = 0;
  const poll = setInterval(() => {
    sinceComment += pollMs;
    if (sinceComment >= 15_000) {
      sinceComment = 0;
      write(": keepalive\n\n");
    }
    deps.sessions.get(id).then(
      (next) => {
        if (!next && deps.sessions.degraded) return; // unknown here is not gone while Redis is away
        if (!next) {
          send("warning", { event: "session_ended", message: "this MCP session expired or was closed" });
          return end();
        }
        if (!sameSeat(next.seat, current.seat)) {
          // A seat was attached (or changed) through some replica: start pushing it from its start.
          lastEventId = undefined;
          seatStarted = true;
          following?.abort();
        }
        current = next;
      },
      () => {},
    );
  }, pollMs);
  deps.onStream?.(1);
  try {
    while (!closed.signal.aborted && !ended) {
      const seat = current.seat;
      if (!seat) {
        await new Promise((resolve) => setTimeout(resolve, pollMs));
        continue;
      }
      following = new AbortController();
      const signal = AbortSignal.any([closed.signal, following.signal]);
      // After the client's Last-Event-ID; else, for a seat attached while this stream was open,
      // from where the seat started (nothing between attach and now is lost); else from the head.
      const after = lastEventId ?? (seatStarted ? current.cursor : undefined);
      let first = true;
      try {
        const authorization = `Bearer ${seat.token}`;
        const { principal } = await deps.auth.authenticate(authorization);
        shutSeat?.();
        shutSeat = deps.doors?.open(authorization, principal, revokedNotice);
        // From the head, the push shares the drone's upstream with its other readers (they see the same).
        const shared =
          deps.shared && after === undefined
            ? deps.shared.join(
                sharingKey(activityWhat(seat.cubeId), principal),
                activityShare,
                edgeMember(deps, {
                  authorization,
                  credential: deps.auth.credentialKeyOf(authorization) as string,
                  subjects: subjectsOf(principal),
                  ...(deps.onResume ? { onResume: deps.onResume } : {}),
                  open: openActivity(deps.upstreams, seat.cubeId),
                  check: mayReadCube(deps.upstreams, seat.cubeId),
                }),
                signal,
              )
            : undefined;
        const followed =
          shared ??
          follow({
            after,
            signal,
            step: activityStep,
            open: async (from) => {
              if (!first) deps.onResume?.();
              first = false;
              const { principal } = await deps.auth.authenticate(authorization);
              const metadata = upstreamMetadata(deps.internalKey, principal);
              return deps.upstreams.activity.subscribeActivity(
                { cubeId: seat.cubeId, ...(from !== undefined ? { after: from } : {}) },
                { metadata, signal },
              );
            },
          });
        for await (const { message } of followed) {
          const { event } = message;
          if (event.case === "entry" && event.value.author?.droneId === seat.droneId) {
            // The drone's own post is not pushed back to it (it knows what it said).
            lastEventId = event.value.cursor;
          } else if (event.case === "entry" || event.case === "notification") {
            // Agents pay per character: a push is the item's text line (what log_read shows; its #n
            // is the handle the next call takes), the cube cursor its SSE event id.
            const item = { item: { case: event.case, value: event.value } } as ActivityItem;
            for (const { line } of renderItems([item], { droneId: seat.droneId, labels: new Map() })) {
              send("info", line, event.value.cursor);
            }
            lastEventId = event.value.cursor;
          } else if (event.case === "heartbeat" || event.case === "ready") {
            if (event.case === "heartbeat") write(": heartbeat\n\n");
            // Where to go on from if this stream ends before an entry (a start position).
            lastEventId ??= event.value.cursor || undefined;
          } else if (event.case === "reset") {
            // Retention pruned past the resume position: say so, and go on after the floor.
            send("notice", { event: "reset", message: PRUNED }, event.value.cursor);
            lastEventId = event.value.cursor;
          } else if (event.case === "closed") {
            // A shared upstream closes a member too slow for it at its cursor: go on from there.
            if (event.value.cursor) lastEventId = event.value.cursor;
          } else if (event.case === "accessRevoked") {
            // Say why pushing stops (rotation, eviction, revocation) instead of going quiet.
            const { reason } = event.value;
            send("warning", {
              event: "access_revoked",
              reason,
              message: "the seat's access was revoked; attach again",
            });
            return end();
          }
        }
      } catch (error) {
        if (closed.signal.aborted) break;
        const { code } = toStatus(error);
        if (code === status.UNAUTHENTICATED || code === status.PERMISSION_DENIED || code === status.NOT_FOUND) {
          send("warning", { event: "access_revoked", message: `${status[code]}: the seat or credential was revoked` });
          return end();
        }
        if (code === status.RESOURCE_EXHAUSTED) {
          // Too many streams for this seat's credential: pushing stops; log_read is the pull path.
          send("warning", { event: "push_stopped", message: "stream limit reached for this seat; use log_read" });
          return end();
        }
        deps.logger.warn({ err: error }, "mcp push stream failed");
        return end();
      }
    }
  } finally {
    shutBearer?.();
    shutSeat?.();
    clearInterval(poll);
    deps.onStream?.(-1);
    if (!ended) response.end();
  }
}
