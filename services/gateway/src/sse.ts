import { once } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import { toJson } from "@bufbuild/protobuf";
import type { Code } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import { type Metadata, status } from "@grpc/grpc-js";
import { SubscribeActivityResponseSchema } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { WatchMachinesResponseSchema } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { DomainError, isServiceError, REQUEST_ID_HEADER, ResourceExhaustedError } from "@unimatrix/service-kit";
import type { EdgeAuthenticator } from "./auth";
import { chargeAddress, upstreamMetadata } from "./forward";
import type { RateLimiter } from "./rate-limit";
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
  readonly internalKey: string;
  readonly onStream?: (delta: 1 | -1) => void;
}

/** Writes one frame; false when the socket buffer is full (wait for `drain`). */
function writeFrame(response: ServerResponse, frame: SseFrame): boolean {
  let text = "";
  if (frame.comment !== undefined) text += `: ${frame.comment}\n`;
  if (frame.event !== undefined) text += `event: ${frame.event}\n`;
  if (frame.id !== undefined) text += `id: ${frame.id}\n`;
  if (frame.data !== undefined) text += `data: ${JSON.stringify(frame.data)}\n`;
  return response.write(`${text}\n`);
}

/** The cursor to resume from: `?after=` wins over `Last-Event-ID`; undefined when neither is given. */
export function resumeCursor(request: Pick<IncomingMessage, "headers">, url: URL): string | undefined {
  const after = url.searchParams.get("after");
  if (after !== null) return after;
  const last = request.headers["last-event-id"];
  return typeof last === "string" ? last : undefined;
}

function errorStatus(error: unknown): { code: status; message: string } {
  if (error instanceof DomainError) return { code: error.code, message: error.message };
  if (isServiceError(error)) return { code: error.code, message: error.details };
  return { code: status.INTERNAL, message: "internal error" };
}

/**
 * Serves one SSE stream backed by a gRPC server stream. Errors before the first event become an
 * HTTP error with Connect error JSON; after it, a final `error` event. The upstream stream is
 * cancelled when the client goes away.
 */
async function serveStream<M>(
  deps: SseDeps,
  request: IncomingMessage,
  response: ServerResponse,
  open: (options: { metadata: Metadata; signal: AbortSignal }) => AsyncIterable<M>,
  toFrames: (message: M) => SseFrame[],
): Promise<void> {
  const controller = new AbortController();
  request.once("close", () => controller.abort());
  let started = false;
  try {
    const caller = await deps.auth.authenticate(request.headers.authorization, () =>
      chargeAddress(deps.limiter, request.socket.remoteAddress ?? ""),
    );
    if (!deps.limiter.take(caller.credentialKey)) {
      throw new ResourceExhaustedError("rate limit exceeded for this credential; slow down");
    }
    const requestId = request.headers[REQUEST_ID_HEADER];
    const metadata = upstreamMetadata(
      deps.internalKey,
      caller.principal,
      typeof requestId === "string" ? requestId : null,
    );
    const stream = open({ metadata, signal: controller.signal });
    deps.onStream?.(1);
    try {
      for await (const message of stream) {
        if (!started) {
          started = true;
          response.writeHead(200, {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache, no-transform",
            connection: "keep-alive",
            "x-accel-buffering": "no",
          });
          response.write("retry: 2000\n\n");
        }
        let flushed = true;
        for (const frame of toFrames(message)) {
          flushed = writeFrame(response, frame);
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
    if (!started) response.writeHead(204);
    response.end();
  } catch (error) {
    if (controller.signal.aborted && request.destroyed) return;
    const { code, message } = errorStatus(error);
    if (!started) {
      // Connect's own code names and HTTP statuses (the gRPC codes are Connect's codes).
      response.writeHead(codeToHttpStatus(code as number as Code), { "content-type": "application/json" });
      const body = JSON.stringify({ code: codeToString(code as number as Code), message });
      response.end(body);
    } else {
      writeFrame(response, { event: "error", data: { code: codeToString(code as number as Code), message } });
      response.end();
    }
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
  const after = resumeCursor(request, url);
  return serveStream(
    deps,
    request,
    response,
    ({ metadata, signal }) =>
      deps.upstreams.activity.subscribeActivity(
        { cubeId, ...(after !== undefined ? { after } : {}) },
        { metadata, signal },
      ),
    (message) => {
      const json = toJson(SubscribeActivityResponseSchema, message) as Record<string, unknown>;
      const { event } = message;
      switch (event.case) {
        case "entry":
          return [{ event: "entry", id: event.value.cursor, data: json.entry }];
        case "notification":
          return [{ event: "notification", id: event.value.cursor, data: json.notification }];
        case "heartbeat":
          return [{ comment: `heartbeat ${new Date().toISOString()}` }];
        case "ready":
          return [{ event: "ready", id: event.value.cursor || undefined, data: json.ready }];
        case "accessRevoked":
          return [{ event: "access_revoked", data: json.accessRevoked ?? {}, end: true }];
        case "closed":
          return [{ event: "closed", data: json.closed ?? {}, end: true }];
        default:
          return [];
      }
    },
  );
}

/** `GET /v1/machines/events`: the presence watch contract (WatchMachines) over SSE. */
export function machineEvents(deps: SseDeps, request: IncomingMessage, response: ServerResponse, url: URL) {
  const after = resumeCursor(request, url) ?? "";
  return serveStream(
    deps,
    request,
    response,
    ({ metadata, signal }) => deps.upstreams.machine.watchMachines({ after }, { metadata, signal }),
    (message) => {
      const json = toJson(WatchMachinesResponseSchema, message) as Record<string, unknown>;
      const { event } = message;
      switch (event.case) {
        case "machineSnapshot":
          return [{ event: "machine_snapshot", id: event.value.cursor, data: json.machineSnapshot }];
        case "machineLinked":
          return [{ event: "machine_linked", id: event.value.cursor, data: json.machineLinked }];
        case "machineUnlinked":
          return [{ event: "machine_unlinked", id: event.value.cursor, data: json.machineUnlinked }];
        case "machineReady":
          return [{ event: "machine_ready", id: event.value.cursor, data: json.machineReady }];
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
