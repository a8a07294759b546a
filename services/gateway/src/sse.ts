import { once } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import { toJson } from "@bufbuild/protobuf";
import { type Metadata, status } from "@grpc/grpc-js";
import {
  StreamCloseReason,
  type SubscribeActivityResponse,
  SubscribeActivityResponseSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { WatchMachinesResponseSchema } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { DomainError, ResourceExhaustedError } from "@unimatrix/service-kit/errors";
import { REQUEST_ID_HEADER } from "@unimatrix/service-kit/logger";
import { activityShare, activityWhat, edgeMember, mayReadCube, openActivity } from "./activity-share";
import type { EdgeAuthenticator } from "./auth";
import { clientAddress, type TrustedProxies } from "./client-address";
import type { CredentialDoors } from "./doors";
import type { StreamCaps, StreamSlot } from "./fleet/streams";
import { follow, type Step } from "./follow";
import { chargeAddress, upstreamMetadata } from "./forward";
import { JSON_WRITE } from "./json-options";
import type { RateLimiter } from "./rate-limit";
import type { SharedKind } from "./shared-member";
import { type SharedUpstreams, sharingKey, subjectsOf } from "./shared-upstream";
import { STREAM_HEADERS } from "./sse-headers";
import { answerOf, errorJson } from "./status-table";
import type { Upstreams } from "./upstreams";

/** One thing to write on an SSE stream. */
export interface SseFrame {
  readonly event?: string;
  /** The cursor a reconnecting client sends back as `Last-Event-ID`. */
  readonly id?: string;
  readonly data?: unknown;
  /** A comment line (heartbeat); invisible to EventSource listeners. */
  readonly comment?: string;
  /** Ends the stream after this frame. */
  readonly end?: boolean;
}

/** What the SSE endpoints need. */
export interface SseDeps {
  readonly upstreams: Upstreams;
  readonly auth: EdgeAuthenticator;
  readonly limiter: RateLimiter;
  readonly caps: StreamCaps;
  readonly maxStreams: number;
  readonly trusted: TrustedProxies;
  readonly internalKey: string;
  readonly onStream?: (delta: 1 | -1) => void;
  /** Told each time an upstream stream is re-opened after its replica went away. */
  readonly onResume?: () => void;
  /** Shared upstream subscriptions (streams from the head as the same credential share one); none: each stream opens its own. */
  readonly shared?: SharedUpstreams;
  /** Closes a stream with `access_revoked` when its credential stops authenticating (rotation, revocation). */
  readonly doors?: CredentialDoors;
}

/** The text of frames shared by many streams, built once (frames are never modified after they are made). */
const frameTexts = new WeakMap<SseFrame, string>();

/** Writes one frame; false when the socket buffer is full (wait for `drain`). */
function writeFrame(response: ServerResponse, frame: SseFrame): boolean {
  const cached = frameTexts.get(frame);
  if (cached !== undefined) return response.write(cached);
  const text = frameText(frame);
  frameTexts.set(frame, text);
  return response.write(text);
}

function frameText(frame: SseFrame): string {
  let text = "";
  if (frame.comment !== undefined) text += `: ${frame.comment}\n`;
  if (frame.event !== undefined) text += `event: ${frame.event}\n`;
  if (frame.id !== undefined) text += `id: ${frame.id}\n`;
  if (frame.data !== undefined) text += `data: ${JSON.stringify(frame.data)}\n`;
  return `${text}\n`;
}

/** The frames of a message shared by many streams, built once per message (JSON and text alike). */
const sharedFrames = new WeakMap<object, SseFrame[]>();
function framesOnce(message: object, build: () => SseFrame[]): SseFrame[] {
  let frames = sharedFrames.get(message);
  if (!frames) {
    frames = build();
    sharedFrames.set(message, frames);
  }
  return frames;
}

/** The cursor to resume from: `?after=` wins over `Last-Event-ID`; undefined when neither is given. */
export function resumeCursor(request: Pick<IncomingMessage, "headers">, url: URL): string | undefined {
  const after = url.searchParams.get("after");
  if (after !== null) return after;
  const last = request.headers["last-event-id"];
  return typeof last === "string" ? last : undefined;
}

/** Opens one upstream stream after a cursor, as the caller. */
type Open<M> = (after: string | undefined, options: { metadata: Metadata; signal: AbortSignal }) => AsyncIterable<M>;

/**
 * Serves one SSE stream backed by a gRPC server stream that outlives the replica behind it (see
 * `follow`): when the upstream replica goes away the stream is re-opened from the last cursor sent,
 * so the browser sees no break, no gap and no duplicate. The caller's slot counts against its
 * fleet-wide stream cap while the stream is open. Errors before the first event become an HTTP
 * error with Connect error JSON — except a service that is briefly unavailable, which gets 200 and
 * is retried — and after it, a final `error` event.
 */
async function serveStream<M>(
  deps: SseDeps,
  request: IncomingMessage,
  response: ServerResponse,
  after: string | undefined,
  open: Open<M>,
  step: (message: M) => Step,
  /** `readySent`: the browser already had its ready event (a resumed upstream's is not repeated). */
  toFrames: (message: M, readySent: boolean) => SseFrame[],
  /**
   * How this stream may share its upstream with others who see the same (`deps.shared`), only
   * when it starts from the head: what it reads, and the unary call that says whether a principal
   * may read it (run with that principal's metadata; it rejects when not).
   */
  share?: {
    readonly what: string;
    readonly kind: SharedKind<M>;
    readonly check: (metadata: Metadata) => Promise<unknown>;
  },
): Promise<void> {
  const controller = new AbortController();
  request.once("close", () => controller.abort());
  let started = false;
  const start = () => {
    if (started) return;
    started = true;
    response.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      ...STREAM_HEADERS,
    });
    response.write("retry: 2000\n\n");
  };
  let slot: StreamSlot | undefined;
  let shut: (() => void) | undefined;
  try {
    // A token service briefly down at connect is not the browser's problem: the stream opens
    // (200) and the token is checked again before anything is read upstream.
    const caller = await deps.auth
      .authenticate(request.headers.authorization, () =>
        chargeAddress(deps.limiter, clientAddress(request, deps.trusted)),
      )
      .catch((error: unknown) => {
        if (error instanceof DomainError && error.code === status.UNAVAILABLE) return undefined;
        throw error;
      });
    const credentialKey = caller?.credentialKey ?? deps.auth.credentialKeyOf(request.headers.authorization)!;
    if (!(await deps.limiter.take(credentialKey))) {
      throw new ResourceExhaustedError("rate limit exceeded for this credential; slow down");
    }
    slot = await deps.caps.open(credentialKey);
    if (!slot) {
      throw new ResourceExhaustedError(
        `this credential already holds ${deps.maxStreams} open streams across the gateways; close one first`,
      );
    }
    // The credential's door: when it stops authenticating the stream ends with `access_revoked`
    // (whatever the upstream is doing), also a stream whose upstream cannot tell (machine watches).
    shut = deps.doors?.open(request.headers.authorization, caller?.principal, () => {
      if (controller.signal.aborted) return;
      start();
      writeFrame(response, { event: "access_revoked", data: { reason: "credential revoked" } });
      controller.abort();
      response.end();
    });
    const requestId = request.headers[REQUEST_ID_HEADER];
    const requestIdOf = typeof requestId === "string" ? requestId : null;
    let first = true;
    const openUpstream = async (from: string | undefined, signal: AbortSignal) => {
      // Re-authenticated on every (re)open, so a revoked token does not ride a failover.
      const reopened = !first;
      first = false;
      const { principal } = caller && !reopened ? caller : await deps.auth.authenticate(request.headers.authorization);
      if (reopened) deps.onResume?.();
      const metadata = upstreamMetadata(deps.internalKey, principal, requestIdOf);
      return open(from, { metadata, signal });
    };
    const onRetry = () => {
      // A backend briefly down at connect: answer 200 now and keep trying upstream.
      start();
      writeFrame(response, { comment: "reconnecting" });
    };
    const authorization = request.headers.authorization;
    const followed =
      share && deps.shared && after === undefined && caller
        ? deps.shared.join(
            sharingKey(share.what, caller.principal),
            share.kind,
            edgeMember(deps, {
              authorization,
              credential: credentialKey,
              subjects: subjectsOf(caller.principal),
              requestId: requestIdOf,
              onRetry,
              ...(deps.onResume ? { onResume: deps.onResume } : {}),
              open,
              check: share.check,
            }),
            controller.signal,
          )
        : follow({
            after,
            signal: controller.signal,
            step,
            open: (from) => openUpstream(from, controller.signal),
            onRetry,
          });
    deps.onStream?.(1);
    try {
      let readySent = false;
      for await (const { message } of followed) {
        if (controller.signal.aborted) break; // closed meanwhile (its credential was revoked)
        start();
        let flushed = true;
        for (const frame of toFrames(message, readySent)) {
          flushed = writeFrame(response, frame);
          if (frame.event === "ready" || frame.event === "machine_ready") readySent = true;
          if (frame.end) {
            controller.abort();
            response.end();
            return;
          }
        }
        // Backpressure: read no further upstream until the browser has taken what was written,
        // so a slow reader shows up as lag at the service (which cuts it) instead of gateway memory.
        if (!flushed) await once(response, "drain", { signal: controller.signal }).catch(() => {});
      }
    } finally {
      deps.onStream?.(-1);
    }
    if (response.writableEnded) return;
    if (!started) response.writeHead(204);
    response.end();
  } catch (error) {
    if (controller.signal.aborted && (request.destroyed || response.writableEnded)) return;
    const { code, message, row } = answerOf(error);
    if (!started) {
      // Connect error JSON with Connect's HTTP status (the status table's).
      response.writeHead(row.http, { "content-type": "application/json" });
      response.end(JSON.stringify(errorJson(code, message)));
    } else {
      writeFrame(response, { event: "error", data: errorJson(code, message) });
      response.end();
    }
  } finally {
    shut?.();
    controller.abort();
    await slot?.release();
  }
}

/** The SSE frames of an activity event (entries and notifications built once for all the streams that share them). */
function activityFrames(message: SubscribeActivityResponse, readySent: boolean): SseFrame[] {
  const { event } = message;
  if (event.case === "entry" || event.case === "notification") {
    return framesOnce(message, () => {
      const json = toJson(SubscribeActivityResponseSchema, message, JSON_WRITE) as Record<string, unknown>;
      return event.case === "entry"
        ? [{ event: "entry", id: event.value.cursor, data: json.entry }]
        : [{ event: "notification", id: event.value.cursor, data: json.notification }];
    });
  }
  const json = toJson(SubscribeActivityResponseSchema, message, JSON_WRITE) as Record<string, unknown>;
  switch (event.case) {
    case "heartbeat":
      return [{ comment: `heartbeat ${new Date().toISOString()}` }];
    case "ready":
      // Sent once: a resumed upstream's ready is the gateway's business, not the browser's.
      return readySent ? [] : [{ event: "ready", id: event.value.cursor || undefined, data: json.ready }];
    case "accessRevoked":
      return [{ event: "access_revoked", data: json.accessRevoked ?? {}, end: true }];
    case "reset":
      // The cursor was below the cube's retained floor: what followed it was pruned. The id is the
      // floor, so a reconnect resumes after it; the console reloads its view on this event.
      return [{ event: "reset", id: event.value.cursor, data: json.reset }];
    case "closed":
      return event.value.reason === StreamCloseReason.SHUTDOWN
        ? []
        : [{ event: "closed", data: json.closed ?? {}, end: true }];
    default:
      return [];
  }
}

/** `GET /v1/cubes/{cube}/events`: the activity entries and notifications the caller may see. */
export function cubeEvents(
  deps: SseDeps,
  request: IncomingMessage,
  response: ServerResponse,
  cubeId: string,
  url: URL,
) {
  return serveStream(
    deps,
    request,
    response,
    resumeCursor(request, url),
    openActivity(deps.upstreams, cubeId),
    activityShare.step,
    activityFrames,
    { what: activityWhat(cubeId), kind: activityShare, check: mayReadCube(deps.upstreams, cubeId) },
  );
}

/** `GET /v1/machines/events`: the presence watch contract (WatchMachines) over SSE. */
export function machineEvents(deps: SseDeps, request: IncomingMessage, response: ServerResponse, url: URL) {
  return serveStream(
    deps,
    request,
    response,
    resumeCursor(request, url) ?? "",
    (after, options) => deps.upstreams.machine.watchMachines({ after: after ?? "" }, options),
    ({ event }) => {
      switch (event.case) {
        case "machineSnapshot":
        case "machineLinked":
        case "machineUnlinked":
        case "machineReady":
          return { cursor: event.value.cursor };
        case "accessRevoked":
          return { final: true };
        case "goingAway":
          return { goingAway: true, ...(event.value.cursor ? { cursor: event.value.cursor } : {}) };
        default:
          return {};
      }
    },
    (message, readySent) => {
      const json = toJson(WatchMachinesResponseSchema, message, JSON_WRITE) as Record<string, unknown>;
      const { event } = message;
      switch (event.case) {
        case "machineSnapshot":
          return [{ event: "machine_snapshot", id: event.value.cursor, data: json.machineSnapshot }];
        case "machineLinked":
          return [{ event: "machine_linked", id: event.value.cursor, data: json.machineLinked }];
        case "machineUnlinked":
          return [{ event: "machine_unlinked", id: event.value.cursor, data: json.machineUnlinked }];
        case "machineReady":
          return readySent ? [] : [{ event: "machine_ready", id: event.value.cursor, data: json.machineReady }];
        case "heartbeat":
          return [{ comment: `heartbeat ${new Date().toISOString()}` }];
        case "accessRevoked":
          return [{ event: "access_revoked", data: {}, end: true }];
        default:
          return [];
      }
    },
  );
}
