import type { IncomingMessage } from "node:http";
import { status } from "@grpc/grpc-js";
import type { Principal } from "@unimatrix/service-kit/auth";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { toStatus } from "@unimatrix/service-kit/grpc";
import { follow } from "../follow";
import { upstreamMetadata } from "../forward";
import { PRUNED, renderItems } from "./format";
import type { ListenDeps, ListenStream } from "./listen-stream";
import { activityStep } from "./push";
import { seatOf } from "./session";

/** The resource a 2026-07-28 agent listens to: its seat's deliveries. */
export const INBOX_URI = "unimatrix://inbox";

/**
 * Where each delivery's text line and resume position travel (the notification's own params are
 * fixed): short unprefixed `_meta` names, as the spec allows — a push is paid for per character.
 */
const LINE = "line";
const CURSOR = "cursor";

/** What an inbox subscription asks for: `unimatrix://inbox[?seat=…][&after=…]`. */
export interface InboxWanted {
  readonly seat?: string;
  readonly after?: string;
}

/** The seat an inbox listen follows, acting as its drone session token. */
export interface InboxSeat {
  readonly cubeId: string;
  readonly droneId: string;
  readonly authorization: string;
  readonly principal: Principal;
}

/** The inbox subscription among a listen's `resourceSubscriptions`, if any. */
export function inboxOf(uris: unknown): InboxWanted | undefined {
  if (!Array.isArray(uris)) return undefined;
  const uri = uris.find((u): u is string => typeof u === "string" && u.split("?")[0] === INBOX_URI);
  if (uri === undefined) return undefined;
  const query = new URLSearchParams(uri.slice(INBOX_URI.length + 1));
  const seat = query.get("seat") ?? undefined;
  const after = query.get("after") ?? undefined;
  return { ...(seat ? { seat } : {}), ...(after ? { after } : {}) };
}

/**
 * The seat an inbox listen is for: the `seat` query parameter (a session token from
 * `seat_attach`) or the bearer when that is a drone session token. INVALID_ARGUMENT otherwise.
 */
export async function inboxSeatOf(deps: ListenDeps, request: IncomingMessage, wanted: InboxWanted): Promise<InboxSeat> {
  const token = wanted.seat ?? (request.headers.authorization ?? "").replace(/^Bearer\s+/i, "");
  const found = await seatOf(deps.auth, token);
  if (!found) {
    if (wanted.seat) throw new InvalidArgumentError("seat", "is not a session_token from seat_attach");
    throw new InvalidArgumentError(INBOX_URI, "needs ?seat=<session_token> (or the session token as bearer)");
  }
  const { seat, principal } = found;
  return { cubeId: seat.cubeId, droneId: seat.droneId, authorization: `Bearer ${token}`, principal };
}

/**
 * Refuses, before the listen is acknowledged, an `after` that cube refuses (malformed, another
 * cube's, or ahead of the cube's log — as every cursor handed out after a backup is, once the
 * backup is restored): INVALID_ARGUMENT naming `after`, so the client's `listen()` fails with
 * invalid params instead of a stream that ends at once saying nothing. An expired cursor passes
 * (the stream says what was pruned and goes on after the floor), and so does any other failure:
 * the stream meets it and behaves as it always did.
 */
export async function checkInboxCursor(deps: ListenDeps, seat: InboxSeat, after: string | undefined): Promise<void> {
  if (after === undefined) return;
  const metadata = upstreamMetadata(deps.internalKey, seat.principal);
  // Asked of SubscribeActivity, which checks the cursor the same way and marks nothing read (a
  // ReadActivity as the seat would record a read receipt for what the agent has not seen yet).
  const probe = new AbortController();
  const timeout = setTimeout(() => probe.abort(), 10_000);
  try {
    for await (const _first of deps.upstreams.activity.subscribeActivity(
      { cubeId: seat.cubeId, after },
      { metadata, signal: probe.signal },
    ))
      break;
  } catch (error) {
    const { code, message } = toStatus(error);
    if (code === status.INVALID_ARGUMENT) throw new InvalidArgumentError("after", message.replace(/^after: /, ""));
  } finally {
    clearTimeout(timeout);
    probe.abort();
  }
}

/**
 * The seat's deliveries as `notifications/resources/updated`, each carrying its text line (the
 * same line `log_read` shows) and the cube cursor after it in `_meta`. It follows cube from
 * `after` (the last cursor the agent saw; none: from now), on any replica, so a listen reopened
 * anywhere from its last cursor misses nothing and repeats nothing — the protocol no longer
 * resumes SSE, the cursor does. The drone's own posts are not delivered. A revoked seat ends the
 * listen with its response.
 */
export async function followInbox(
  deps: ListenDeps,
  stream: ListenStream,
  seat: InboxSeat,
  after: string | undefined,
): Promise<void> {
  const viewer = { droneId: seat.droneId, labels: new Map<string, string>() };
  let first = true;
  try {
    for await (const { message: event } of follow({
      after,
      signal: stream.signal,
      step: activityStep,
      open: async (from) => {
        if (!first) deps.onResume?.();
        first = false;
        const { principal } = await deps.auth.authenticate(seat.authorization);
        const metadata = upstreamMetadata(deps.internalKey, principal);
        return deps.upstreams.activity.subscribeActivity(
          { cubeId: seat.cubeId, ...(from !== undefined ? { after: from } : {}) },
          { metadata, signal: stream.signal },
        );
      },
    })) {
      const { event: e } = event;
      if (e.case === "entry" || e.case === "notification") {
        if (e.case === "entry" && e.value.author?.droneId === seat.droneId) continue;
        const item = { item: { case: e.case, value: e.value } } as Parameters<typeof renderItems>[0][number];
        for (const rendered of renderItems([item], viewer)) {
          stream.notify(
            "notifications/resources/updated",
            { uri: INBOX_URI },
            { [LINE]: rendered.line, [CURSOR]: e.value.cursor },
          );
        }
      } else if (e.case === "reset") {
        // Retention pruned past the agent's cursor: say so once, and go on after the floor.
        stream.notify(
          "notifications/resources/updated",
          { uri: INBOX_URI },
          { [LINE]: PRUNED, [CURSOR]: e.value.cursor },
        );
      } else if (e.case === "accessRevoked") {
        return stream.finish();
      }
    }
  } catch (error) {
    if (!stream.signal.aborted) {
      const { code } = toStatus(error);
      if (code !== status.UNAUTHENTICATED && code !== status.PERMISSION_DENIED && code !== status.NOT_FOUND) {
        deps.logger.warn({ err: error }, "mcp listen stream failed");
      }
      stream.finish();
    }
  }
}
