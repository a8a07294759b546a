import type { IncomingMessage, ServerResponse } from "node:http";
import { FailedPreconditionError, ResourceExhaustedError } from "@unimatrix/service-kit/errors";
import { REQUEST_ID_HEADER } from "@unimatrix/service-kit/logger";
import type { EdgeAuthenticator } from "./auth";
import { clientAddress, type TrustedProxies } from "./client-address";
import { chargeAddress, upstreamMetadata } from "./forward";
import { isOwn, renderItems } from "./mcp/format";
import type { RateLimiter } from "./rate-limit";
import { answerOf, errorJson } from "./status-table";
import type { Upstreams } from "./upstreams";

/** What `GET /v1/inbox` needs. */
export interface InboxDeps {
  readonly upstreams: Pick<Upstreams, "activity">;
  readonly auth: EdgeAuthenticator;
  readonly limiter: RateLimiter;
  readonly trusted: TrustedProxies;
  readonly internalKey: string;
  readonly timeoutMs: number;
}

/** The body of a `200`: the compact lines (MCP's), whether one of them should stop the agent, the cursor. */
export interface InboxBody {
  readonly lines: string[];
  /** True when a line is a direct message to the drone or a reply to it (a host's Stop may block once for it). */
  readonly urgent: boolean;
  /** The opaque cursor (also the ETag): send it back as `If-None-Match` once the lines were shown. */
  readonly cursor: string;
}

/** Most items one call returns (the rest come with the next call). */
const PAGE = 50;

/** The validator of `If-None-Match` (a strong or weak ETag, its quotes removed); "" when absent. */
function validatorOf(request: IncomingMessage): string {
  const header = request.headers["if-none-match"];
  if (typeof header !== "string") return "";
  return header
    .trim()
    .replace(/^W\//, "")
    .replace(/^"(.*)"$/, "$1");
}

/**
 * `GET /v1/inbox` with a drone session token: an agent host's hook with no machine daemon reads
 * what waits in its drone's inbox in one call. `If-None-Match` carries the cursor (ETag) of the
 * last answer whose lines the hook put in front of the model: cube moves the inbox past them and
 * marks them delivered (HOOK) and read (ReadUnread's `confirm_through`) and peeks at what is new —
 * the edge only passes the opaque cursor. Nothing new: `304` (with a validator) or `204`, the
 * ETag the cursor to send next time; otherwise `200` with {lines, urgent, cursor}. Errors are
 * Connect error JSON with the status table's HTTP status.
 */
export async function inbox(deps: InboxDeps, request: IncomingMessage, response: ServerResponse): Promise<void> {
  try {
    const caller = await deps.auth.authenticate(request.headers.authorization, () =>
      chargeAddress(deps.limiter, clientAddress(request, deps.trusted)),
    );
    if (!(await deps.limiter.take(caller.credentialKey)))
      throw new ResourceExhaustedError("rate limit exceeded for this credential; slow down");
    const principal = caller.principal;
    if (principal.kind !== "drone-session")
      throw new FailedPreconditionError("only a drone session has an inbox: use its umx_drone_ token");
    const confirmed = validatorOf(request);
    const requestId = request.headers[REQUEST_ID_HEADER];
    const page = await deps.upstreams.activity.readUnread(
      { cubeId: principal.cubeId, pageSize: PAGE, peek: true, confirmThrough: confirmed },
      {
        metadata: upstreamMetadata(deps.internalKey, principal, typeof requestId === "string" ? requestId : null),
        deadline: deps.timeoutMs,
      },
    );
    const viewer = { droneId: principal.droneId, labels: new Map<string, string>() };
    const rendered = renderItems(
      page.items.filter((item) => !isOwn(item, principal.droneId)),
      viewer,
    );
    const headers = { etag: `"${page.cursor}"`, "cache-control": "no-store" };
    if (rendered.length === 0) {
      response.writeHead(confirmed ? 304 : 204, headers);
      response.end();
      return;
    }
    const body: InboxBody = {
      lines: rendered.map((r) => r.line),
      urgent: rendered.some((r) => r.tally === "direct" || r.tally === "reply"),
      cursor: page.cursor,
    };
    response.writeHead(200, { ...headers, "content-type": "application/json" });
    response.end(JSON.stringify(body));
  } catch (error) {
    const { code, message, row } = answerOf(error);
    response.writeHead(row.http, { "content-type": "application/json" });
    response.end(JSON.stringify(errorJson(code, message)));
  }
}
