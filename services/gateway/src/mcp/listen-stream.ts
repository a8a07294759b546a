import type { IncomingMessage, ServerResponse } from "node:http";
import { status } from "@grpc/grpc-js";
import {
  type JSONRPCRequest,
  MissingRequiredClientCapabilityError,
  ProtocolErrorCode,
} from "@modelcontextprotocol/server";
import type { Principal } from "@unimatrix/service-kit/auth";
import { ResourceExhaustedError } from "@unimatrix/service-kit/errors";
import { STREAM_HEADERS } from "../sse-headers";
import { answerOf } from "../status-table";
import type { PushDeps } from "./push";
import type { PushCaps } from "./push-slots";

const SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId";

/** Keepalive comment interval on an idle listen stream. */
const KEEPALIVE_MS = 15_000;

/** What a listen stream needs. */
export interface ListenDeps extends PushDeps, PushCaps {}

/** An open `subscriptions/listen` response stream (SSE), whatever it carries. */
export interface ListenStream {
  /** Aborted when the client went away or the stream finished. */
  readonly signal: AbortSignal;
  /** Sends one notification of this subscription (its id in `_meta`). */
  notify(method: string, params: Record<string, unknown>, meta?: Record<string, unknown>): void;
  /** Ends the subscription with its response: the client sees a graceful end and may listen again. */
  finish(): void;
  /** Releases the stream's slot and doors once whatever fed it has stopped. */
  close(): Promise<void>;
}

/**
 * Answers a listen that cannot start with its JSON-RPC error: the status table's code and HTTP
 * status, except a caller's mistake, which is invalid params in-band on 200 (as the SDK answers
 * handler errors), and a missing client capability (`-32021`), which the spec answers with 400.
 */
export function rejectListen(deps: ListenDeps, response: ServerResponse, message: JSONRPCRequest, error: unknown) {
  let answer: { http: number; error: { code: number; message: string; data?: unknown } };
  if (error instanceof MissingRequiredClientCapabilityError) {
    answer = { http: 400, error: { code: error.code, message: error.message, data: error.data } };
  } else {
    const { code, message: text, row } = answerOf(error, deps.logger, "mcp listen");
    // A caller's mistake in the listen's params is JSON-RPC's invalid params, in-band (as the SDK answers).
    answer =
      code === status.INVALID_ARGUMENT
        ? { http: 200, error: { code: ProtocolErrorCode.InvalidParams, message: text } }
        : { http: row.http, error: { code: row.rpc, message: text } };
  }
  response.writeHead(answer.http, { "content-type": "application/json" });
  response.end(JSON.stringify({ jsonrpc: "2.0", id: message.id, error: answer.error }));
}

/**
 * Opens the SSE response of a `subscriptions/listen`: takes a slot in the credential's fleet-wide
 * stream cap (refusing with 429 when full), sends the acknowledgement, keeps the stream alive and
 * ends it when the bearer — or any of `seats` — is revoked, rotated or expires (the next listen then
 * answers 401). Resolves undefined when it answered a refusal instead.
 */
export async function openListenStream(
  deps: ListenDeps,
  request: IncomingMessage,
  response: ServerResponse,
  message: JSONRPCRequest,
  credentialKey: string,
  acknowledged: Record<string, unknown>,
  seats: readonly { authorization: string; principal: Principal }[],
): Promise<ListenStream | undefined> {
  const slot = await deps.caps.open(credentialKey);
  if (!slot) {
    const held = `this credential already holds ${deps.maxStreams} open streams across the gateways; close one first`;
    rejectListen(deps, response, message, new ResourceExhaustedError(held));
    return undefined;
  }
  const closed = new AbortController();
  request.once("close", () => closed.abort());
  response.writeHead(200, {
    "content-type": "text/event-stream",
    ...STREAM_HEADERS,
  });
  const write = (payload: unknown) => {
    if (!closed.signal.aborted) response.write(`event: message\ndata: ${JSON.stringify(payload)}\n\n`);
  };
  const notify = (method: string, params: Record<string, unknown>, meta: Record<string, unknown> = {}) =>
    write({ jsonrpc: "2.0", method, params: { ...params, _meta: { ...meta, [SUBSCRIPTION_ID]: message.id } } });
  let ended = false;
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
  notify("notifications/subscriptions/acknowledged", { notifications: acknowledged });
  const keepalive = setInterval(() => {
    if (!closed.signal.aborted) response.write(": keepalive\n\n");
  }, KEEPALIVE_MS);
  const bearer = request.headers.authorization ?? "";
  const shut = [
    deps.doors?.open(bearer, undefined, finish),
    ...seats
      .filter((seat) => seat.authorization !== bearer)
      .map((seat) => deps.doors?.open(seat.authorization, seat.principal, finish)),
  ];
  deps.onStream?.(1);
  return {
    signal: closed.signal,
    notify,
    finish,
    async close() {
      clearInterval(keepalive);
      for (const door of shut) door?.();
      deps.onStream?.(-1);
      await slot.release();
      if (!ended && !response.writableEnded) response.end();
    },
  };
}
