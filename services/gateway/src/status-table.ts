import { type Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import { status } from "@grpc/grpc-js";
import { type Status, toStatus } from "@unimatrix/service-kit/grpc";
import type { Logger } from "@unimatrix/service-kit/logger";
import { recordOutcome } from "./request-context";

/**
 * How every face of the gateway answers one status code (the gRPC codes are Connect's codes).
 * Connect forwarding, the SSE endpoints, the MCP endpoint and its tools and the server's own
 * answers all read this table; `toStatus` (the kit's) turns any error into the code and message.
 */
interface StatusRow {
  readonly code: status;
  /** Connect's name (`not_found`): the `code` of Connect error JSON, SSE error frames and bodies, access logs. */
  readonly name: string;
  /** gRPC's name (`NOT_FOUND`): how an MCP tool error's text begins. */
  readonly grpcName: string;
  /** Connect's HTTP status: of Connect errors, SSE refusals, the server's own and the MCP endpoint's answers. */
  readonly http: number;
  /** The JSON-RPC error code the MCP endpoint answers with (-32001 the caller must re-authenticate or find its session, -32002 slow down). */
  readonly rpc: number;
}

/** JSON-RPC codes other than the server-error default -32000. */
const JSON_RPC: Partial<Record<status, number>> = {
  [status.UNAUTHENTICATED]: -32001,
  [status.NOT_FOUND]: -32001,
  [status.UNAVAILABLE]: -32001,
  [status.RESOURCE_EXHAUSTED]: -32002,
  [status.UNKNOWN]: -32603,
  [status.INTERNAL]: -32603,
  [status.DATA_LOSS]: -32603,
};

/** Every code's row: Connect's name and HTTP status (connect-es's own table), gRPC's name, the JSON-RPC code. */
const ROWS = new Map<status, StatusRow>(
  Object.values(status)
    .filter((code): code is status => typeof code === "number")
    .map((code) => [
      code,
      {
        code,
        name: code === status.OK ? "ok" : codeToString(code as number as Code),
        grpcName: status[code],
        http: code === status.OK ? 200 : codeToHttpStatus(code as number as Code),
        rpc: JSON_RPC[code] ?? -32000,
      },
    ]),
);

/** The row of a status code (an unknown number reads as UNKNOWN). */
export function statusRow(code: status): StatusRow {
  return ROWS.get(code) ?? ROWS.get(status.UNKNOWN)!;
}

/** Any error as the status a caller sees (the kit's `toStatus`) and its row; with a logger, what the caller does not see is logged. */
export function answerOf(error: unknown, logger?: Logger, method?: string): Status & { readonly row: StatusRow } {
  const { code, message } = toStatus(error, logger, method);
  return { code, message, row: statusRow(code) };
}

/** Connect error JSON (`{"code":"not_found","message":…}`), also the body of an SSE refusal and its `error` frame. */
export function errorJson(code: status, message: string): { code: string; message: string } {
  return { code: statusRow(code).name, message };
}

/** Any error on the way as a Connect error with the same code, recorded as the request's outcome. */
export function toConnectError(error: unknown): ConnectError {
  let answer: ConnectError;
  if (error instanceof ConnectError) answer = error;
  else {
    const { code, message } = toStatus(error);
    answer = new ConnectError(message, code as number as Code);
  }
  recordOutcome(statusRow(answer.code as number as status).name);
  return answer;
}

/** The HTTP status of an INVALID_ARGUMENT for a body over the limit, on every face (docs/decisions.md). */
export const TOO_LARGE_HTTP = 413;

/** The codes the gateway answers with itself (over SSE, MCP and its own JSON), which label an answer by its HTTP status. */
const OWN_ANSWERS = [
  status.INVALID_ARGUMENT,
  status.UNAUTHENTICATED,
  status.PERMISSION_DENIED,
  status.NOT_FOUND,
  status.RESOURCE_EXHAUSTED,
  status.UNAVAILABLE,
].map(statusRow);

/**
 * The Connect code an HTTP status stands for when no RPC recorded its own (static files, SSE and
 * MCP refusals, health): the code of the gateway's own answers with that status; `TOO_LARGE_HTTP`
 * `invalid_argument`; any other 5xx `internal`, any other 4xx `unknown`.
 */
export function codeOfHttpStatus(http: number): string {
  if (http < 400) return statusRow(status.OK).name;
  if (http === TOO_LARGE_HTTP) return statusRow(status.INVALID_ARGUMENT).name;
  const own = OWN_ANSWERS.find((row) => row.http === http);
  if (own) return own.name;
  return statusRow(http >= 500 ? status.INTERNAL : status.UNKNOWN).name;
}
