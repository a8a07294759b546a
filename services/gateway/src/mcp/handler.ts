import type { IncomingMessage, ServerResponse } from "node:http";
import { status } from "@grpc/grpc-js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest, SetLevelRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { Principal } from "@unimatrix/service-kit/auth";
import { clientAddress, type TrustedProxies } from "../client-address";
import { chargeAddress } from "../forward";
import { wwwAuthenticate } from "../protected-resource";
import type { RateLimiter } from "../rate-limit";
import { answerOf, statusRow, TOO_LARGE_HTTP } from "../status-table";
import { serveListen } from "./listen";
import { SERVER_INFO, statelessMcp } from "./modern";
import { type PushDeps, servePush } from "./push";
import { openPushSlots, type PushCaps } from "./push-slots";
import { McpSession } from "./session";
import type { SessionRecord } from "./session-store";
import { INSTRUCTIONS, registerTools, serveToolList } from "./tools";

/** What the `/mcp` endpoint needs. */
export interface McpDeps extends PushDeps, PushCaps {
  readonly limiter: RateLimiter;
  readonly maxBodyBytes: number;
  readonly trusted: TrustedProxies;
  /** Counts session starts and ends on this replica (a metric). */
  readonly onSessionEvent?: (event: "opened" | "closed" | "refused") => void;
  /** Origins allowed to use `/mcp` from a browser (`*` = any); a request without Origin is allowed. */
  readonly allowedOrigins: readonly string[];
}

/** JSON-RPC's own code for a body that is not JSON. */
const PARSE_ERROR = -32700;

function jsonError(response: ServerResponse, httpStatus: number, code: number, message: string): void {
  response.writeHead(httpStatus, { "content-type": "application/json" });
  response.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}

/** Refuses a request with `code`'s HTTP status and JSON-RPC error code (the status table's). */
function refuse(response: ServerResponse, code: status, message: string): void {
  const row = statusRow(code);
  jsonError(response, row.http, row.rpc, message);
}

async function readJson(request: IncomingMessage, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new RangeError(`request body over ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/** A page served from this machine (a rebinding page's Origin is the attacker's name, never one of these). */
const LOOPBACK_ORIGIN = /^https?:\/\/(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d{1,5})?$/;

/** True when a browser of `origin` may use `/mcp`: a loopback origin, or one on the allow-list (`*`: any). */
function originAllowed(origin: string, allowed: readonly string[]): boolean {
  return LOOPBACK_ORIGIN.test(origin) || allowed.includes("*") || allowed.includes(origin);
}

/** True for a JSON-RPC tools/call request, or a batch of nothing else. */
function onlyToolCalls(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return (
    messages.length > 0 &&
    messages.every((m) => typeof m === "object" && m !== null && (m as { method?: unknown }).method === "tools/call")
  );
}

/**
 * MCP over streamable HTTP at `/mcp`: revision 2026-07-28 (stateless, see `modern.ts`) for requests
 * that carry its `_meta` envelope, 2025-11-25 for the rest. A 2025-11-25 session is served by any
 * replica: it lives in
 * the fleet's session store and each request gets an MCP server of its own built from it (the SDK's
 * stateless transport; the session id and its checks are the gateway's). Every request carries
 * the bearer token; a session belongs to the credential that opened it and answers 404 to any other.
 * `GET` is the push stream (see `servePush`), `DELETE` ends the session.
 */
export function mcpHandler(deps: McpDeps) {
  const pushes = new Set<ServerResponse>();
  const stateless = statelessMcp(deps);

  const serve = async (
    request: IncomingMessage,
    response: ServerResponse,
    id: string,
    record: SessionRecord,
    body: unknown,
  ) => {
    const session = new McpSession(deps, record, request.headers.authorization ?? "", (patch) =>
      deps.sessions.update(id, patch),
    );
    const server = new McpServer(SERVER_INFO, { capabilities: { logging: {} }, instructions: INSTRUCTIONS });
    registerTools(server, session);
    serveToolList(server);
    server.server.setRequestHandler(SetLevelRequestSchema, async (setLevel) => {
      await session.setLogLevel(setLevel.params.level);
      return {};
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    response.setHeader("mcp-session-id", id);
    response.once("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(request, response, body);
  };

  /** For a POST on an existing session by the token that opened it: that token's key, else undefined. */
  const revokedSessionKey = async (request: IncomingMessage, sessionId: string | string[] | undefined) => {
    if (request.method !== "POST" || typeof sessionId !== "string") return undefined;
    const key = deps.auth.credentialKeyOf(request.headers.authorization);
    const record = key === undefined ? undefined : await deps.sessions.get(sessionId).catch(() => undefined);
    return record?.credentialKey === key ? key : undefined;
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    // DNS-rebinding protection (MCP spec): a browser's Origin must be on the allow-list.
    const origin = request.headers.origin;
    if (origin !== undefined && !originAllowed(origin, deps.allowedOrigins)) {
      return refuse(response, status.PERMISSION_DENIED, `origin ${origin} is not allowed`);
    }
    const sessionId = request.headers["mcp-session-id"];
    let credentialKey: string;
    let principal: Principal | undefined;
    /** The session's own credential, revoked since: only tool calls are answered (as tool errors saying so). */
    let revokedSession = false;
    try {
      ({ credentialKey, principal } = await deps.auth.authenticate(request.headers.authorization, () =>
        chargeAddress(deps.limiter, clientAddress(request, deps.trusted)),
      ));
    } catch (error) {
      const { code, message } = answerOf(error);
      if (code === status.RESOURCE_EXHAUSTED || code === status.UNAVAILABLE) return refuse(response, code, message);
      // Any other failure to authenticate is answered as UNAUTHENTICATED.
      const revoked = await revokedSessionKey(request, sessionId);
      if (revoked === undefined) {
        response.setHeader("www-authenticate", wwwAuthenticate(deps.auth.resource, "mcp"));
        return refuse(response, status.UNAUTHENTICATED, message);
      }
      // The session's own credential, revoked since: its tool calls answer as tool errors saying
      // so (every tool re-authenticates), never as a bare transport failure; nothing else is served.
      credentialKey = revoked;
      revokedSession = true;
    }
    if (!(await deps.limiter.take(credentialKey))) {
      return refuse(response, status.RESOURCE_EXHAUSTED, "rate limit exceeded for this credential; slow down");
    }
    let body: unknown;
    if (request.method === "POST") {
      try {
        body = await readJson(request, deps.maxBodyBytes);
      } catch (error) {
        // INVALID_ARGUMENT's status (413 over the body limit) with JSON-RPC's parse-error code.
        const http = error instanceof RangeError ? TOO_LARGE_HTTP : statusRow(status.INVALID_ARGUMENT).http;
        return jsonError(response, http, PARSE_ERROR, (error as Error).message);
      }
    }
    // 2026-07-28 (a request with the `_meta` envelope): no session, served by the SDK's per-request entry.
    if (!revokedSession && principal) {
      const route = stateless.route(request, body);
      if (route === "sdk") return stateless.serve(request, response, body, { credentialKey, principal });
      if (route !== "legacy") return serveListen(deps, stateless.tasks, request, response, route.listen, credentialKey);
    }
    if (revokedSession && !onlyToolCalls(body)) {
      response.setHeader("www-authenticate", wwwAuthenticate(deps.auth.resource, "mcp", "invalid_token"));
      return refuse(
        response,
        status.UNAUTHENTICATED,
        "this session's credential was revoked; only tool calls answer (saying so)",
      );
    }
    if (typeof sessionId === "string") {
      const record = await deps.sessions.get(sessionId);
      if (!record || record.credentialKey !== credentialKey) {
        return refuse(response, status.NOT_FOUND, "session not found");
      }
      void deps.sessions.touch(sessionId, record).catch(() => {});
      if (request.method === "GET") {
        // Counted against the credential's stream cap (with its SSE streams) and the session's.
        const slots = await openPushSlots(deps, credentialKey, sessionId);
        if (typeof slots === "string") return refuse(response, status.RESOURCE_EXHAUSTED, slots);
        pushes.add(response);
        response.once("close", () => {
          pushes.delete(response);
          void slots.release();
        });
        try {
          return await servePush(deps, request, response, sessionId, record, principal);
        } finally {
          await slots.release();
        }
      }
      if (request.method === "DELETE") {
        await deps.sessions.delete(sessionId, credentialKey);
        deps.onSessionEvent?.("closed");
        response.writeHead(200).end();
        return;
      }
      if (request.method !== "POST") return jsonError(response, 405, -32000, "method not allowed");
      return serve(request, response, sessionId, record, body);
    }
    if (request.method !== "POST" || !isInitializeRequest(body)) {
      return refuse(response, status.INVALID_ARGUMENT, "no session: start with an initialize request");
    }
    const id = await deps.sessions.create(credentialKey);
    deps.onSessionEvent?.(id ? "opened" : "refused");
    if (!id) {
      const held = await deps.sessions.held(credentialKey);
      return refuse(
        response,
        status.RESOURCE_EXHAUSTED,
        `this credential already holds ${held} MCP sessions; close one first`,
      );
    }
    return serve(request, response, id, { credentialKey }, body);
  };

  return {
    handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
      return handle(request, response).catch((error: unknown) => {
        if (response.headersSent) return void response.end();
        const { code, message } = answerOf(error, deps.logger, "mcp");
        if (code === status.INTERNAL) return refuse(response, code, message);
        // Kept as it was: any caller-visible failure here answers 400 with INTERNAL's JSON-RPC code, whatever its own.
        jsonError(response, 400, statusRow(status.INTERNAL).rpc, message);
      });
    },
    /** Ends this replica's push streams (gateway shutdown); the sessions live on in the fleet. */
    async close(): Promise<void> {
      for (const response of [...pushes]) response.end();
      await stateless.close();
    },
  };
}
