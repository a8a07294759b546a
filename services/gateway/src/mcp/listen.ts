import type { IncomingMessage, ServerResponse } from "node:http";
import { status } from "@grpc/grpc-js";
import type { JSONRPCRequest } from "@modelcontextprotocol/server";
import type { Principal } from "@unimatrix/service-kit/auth";
import { InvalidArgumentError, ResourceExhaustedError } from "@unimatrix/service-kit/errors";
import { toStatus } from "@unimatrix/service-kit/grpc";
import { follow } from "../follow";
import { upstreamMetadata } from "../forward";
import { answerOf } from "../status-table";
import { PRUNED, renderItems } from "./format";
import { activityStep, type PushDeps } from "./push";
import type { PushCaps } from "./push-slots";
import { seatOf } from "./session";

/** The resource a 2026-07-28 agent listens to: its seat's deliveries. */
const INBOX_URI = "unimatrix://inbox";

const SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId";
/**
 * Where each delivery's text line and resume position travel (the notification's own params are
 * fixed): short unprefixed `_meta` names, as the spec allows — a push is paid for per character.
 */
const LINE = "line";
const CURSOR = "cursor";

/** Keepalive comment interval on an idle listen stream. */
const KEEPALIVE_MS = 15_000;

/** What a listen stream needs. */
export interface ListenDeps extends PushDeps, PushCaps {}

/** The inbox subscription a `subscriptions/listen` asks for: `unimatrix://inbox[?seat=…][&after=…]`. */
export function inboxSubscription(message: JSONRPCRequest): { seat?: string; after?: string } | undefined {
  const params = message.params as { notifications?: { resourceSubscriptions?: unknown } } | undefined;
  const uris = params?.notifications?.resourceSubscriptions;
  if (!Array.isArray(uris)) return undefined;
  const uri = uris.find((u): u is string => typeof u === "string" && u.split("?")[0] === INBOX_URI);
  if (uri === undefined) return undefined;
  const query = new URLSearchParams(uri.slice(INBOX_URI.length + 1));
  const seat = query.get("seat") ?? undefined;
  const after = query.get("after") ?? undefined;
  return { ...(seat ? { seat } : {}), ...(after ? { after } : {}) };
}

/**
 * `subscriptions/listen` on `unimatrix://inbox` (revision 2026-07-28): the seat's deliveries as
 * `notifications/resources/updated`, each carrying its text line (the same line `log_read` shows)
 * and the cube cursor after it in `_meta`. The stream follows cube from `after` (the last cursor
 * the agent saw; none: from now), on any replica, so a listen reopened anywhere from its last
 * cursor misses nothing and repeats nothing — the protocol no longer resumes SSE, the cursor does.
 * The drone's own posts are not delivered. The seat is the `seat` query parameter (a session token
 * from `seat_attach`) or the bearer when that is a drone session token. A revoked seat or bearer
 * ends the stream with the listen's own response (the next listen answers 401).
 *
 * Written here rather than through the SDK's listen router: that router fans out server-wide
 * change events, with no seam for a per-listener principal or starting position.
 */
export async function serveInboxListen(
  deps: ListenDeps,
  request: IncomingMessage,
  response: ServerResponse,
  message: JSONRPCRequest,
  credentialKey: string,
): Promise<void> {
  const wanted = inboxSubscription(message)!;
  const bearer = request.headers.authorization ?? "";
  const reject = (error: unknown) => {
    const { code, message: text, row } = answerOf(error, deps.logger, "mcp listen");
    const http = code === status.INVALID_ARGUMENT ? 200 : row.http;
    response.writeHead(http, { "content-type": "application/json" });
    response.end(JSON.stringify({ jsonrpc: "2.0", id: message.id, error: { code: row.rpc, message: text } }));
  };
  let seat: { cubeId: string; droneId: string; authorization: string; principal: Principal };
  try {
    const token = wanted.seat ?? bearer.replace(/^Bearer\s+/i, "");
    const found = await seatOf(deps.auth, token);
    if (!found) {
      if (wanted.seat) throw new InvalidArgumentError("seat", "is not a session_token from seat_attach");
      throw new InvalidArgumentError(INBOX_URI, "needs ?seat=<session_token> (or the session token as bearer)");
    }
    const { seat: record, principal } = found;
    seat = { cubeId: record.cubeId, droneId: record.droneId, authorization: `Bearer ${token}`, principal };
  } catch (error) {
    return reject(error);
  }
  const slot = await deps.caps.open(credentialKey);
  if (!slot) {
    const held = `this credential already holds ${deps.maxStreams} open streams across the gateways; close one first`;
    return reject(new ResourceExhaustedError(held));
  }

  const closed = new AbortController();
  request.once("close", () => closed.abort());
  response.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  const write = (payload: unknown) => {
    if (!closed.signal.aborted) response.write(`event: message\ndata: ${JSON.stringify(payload)}\n\n`);
  };
  const notify = (method: string, params: Record<string, unknown>, meta: Record<string, unknown> = {}) =>
    write({ jsonrpc: "2.0", method, params: { ...params, _meta: { ...meta, [SUBSCRIPTION_ID]: message.id } } });
  let ended = false;
  /** Ends the subscription with its response (the client sees a graceful end and may listen again). */
  const finish = () => {
    if (ended) return;
    ended = true;
    write({
      jsonrpc: "2.0",
      id: message.id,
      result: { resultType: "complete", _meta: { [SUBSCRIPTION_ID]: message.id } },
    });
    closed.abort();
    response.end();
  };
  notify("notifications/subscriptions/acknowledged", { notifications: { resourceSubscriptions: [INBOX_URI] } });
  const keepalive = setInterval(() => {
    if (!closed.signal.aborted) response.write(": keepalive\n\n");
  }, KEEPALIVE_MS);
  // The bearer's door and the seat's: a revoked, rotated or expired credential ends the stream at once.
  const shutBearer = deps.doors?.open(bearer, undefined, finish);
  const shutSeat =
    seat.authorization === bearer ? undefined : deps.doors?.open(seat.authorization, seat.principal, finish);
  deps.onStream?.(1);
  try {
    const viewer = { droneId: seat.droneId, labels: new Map<string, string>() };
    let first = true;
    for await (const { message: event } of follow({
      after: wanted.after,
      signal: closed.signal,
      step: activityStep,
      open: async (from) => {
        if (!first) deps.onResume?.();
        first = false;
        const { principal } = await deps.auth.authenticate(seat.authorization);
        const metadata = upstreamMetadata(deps.internalKey, principal);
        return deps.upstreams.activity.subscribeActivity(
          { cubeId: seat.cubeId, ...(from !== undefined ? { after: from } : {}) },
          { metadata, signal: closed.signal },
        );
      },
    })) {
      const { event: e } = event;
      if (e.case === "entry" || e.case === "notification") {
        if (e.case === "entry" && e.value.author?.droneId === seat.droneId) continue;
        const item = { item: { case: e.case, value: e.value } } as Parameters<typeof renderItems>[0][number];
        for (const rendered of renderItems([item], viewer)) {
          notify(
            "notifications/resources/updated",
            { uri: INBOX_URI },
            { [LINE]: rendered.line, [CURSOR]: e.value.cursor },
          );
        }
      } else if (e.case === "reset") {
        // Retention pruned past the agent's cursor: say so once, and go on after the floor.
        notify("notifications/resources/updated", { uri: INBOX_URI }, { [LINE]: PRUNED, [CURSOR]: e.value.cursor });
      } else if (e.case === "accessRevoked") {
        return finish();
      }
    }
  } catch (error) {
    if (!closed.signal.aborted) {
      const { code } = toStatus(error);
      if (code !== status.UNAUTHENTICATED && code !== status.PERMISSION_DENIED && code !== status.NOT_FOUND) {
        deps.logger.warn({ err: error }, "mcp listen stream failed");
      }
      return finish();
    }
  } finally {
    clearInterval(keepalive);
    shutBearer?.();
    shutSeat?.();
    deps.onStream?.(-1);
    await slot.release();
    if (!ended && !response.writableEnded) response.end();
  }
}
