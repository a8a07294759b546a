import type { IncomingMessage, ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest, SetLevelRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { Principal } from "@unimatrix/service-kit/auth";
import { DomainError } from "@unimatrix/service-kit/errors";
import { isServiceError } from "@unimatrix/service-kit/grpc";
import { clientAddress, type TrustedProxies } from "../client-address";
import { chargeAddress } from "../forward";
import type { RateLimiter } from "../rate-limit";
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

/** The version the gateway reports to MCP clients. */
const SERVER_INFO = { name: "unimatrix", version: "0.1.0" };

function jsonError(response: ServerResponse, httpStatus: number, code: number, message: string): void {
  response.writeHead(httpStatus, { "content-type": "application/json" });
  response.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
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

/** True for a JSON-RPC tools/call request, or a batch of nothing else. */
function onlyToolCalls(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return (
    messages.length > 0 &&
    messages.every((m) => typeof m === "object" && m !== null && (m as { method?: unknown }).method === "tools/call")
  );
}

/**
 * MCP over streamable HTTP at `/mcp`, served by any replica for any session: the session lives in
 * the fleet's session store and each request gets an MCP server of its own built from it (the SDK's
 * stateless transport; the session id and its checks are the gateway's). Every request carries
 * the bearer token; a session belongs to the credential that opened it and answers 404 to any other.
 * `GET` is the push stream (see `servePush`), `DELETE` ends the session.
 */
export function mcpHandler(deps: McpDeps) {
  const pushes = new Set<ServerResponse>();

  const serve = async (
    request: IncomingMessage,
    response: ServerResponse,
    id: string,
    record: SessionRecord,
    body: unknown,
  ) => {
    const session = new McpSession(deps, id, record, request.headers.authorization ?? "");
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
    if (origin !== undefined && !deps.allowedOrigins.includes("*") && !deps.allowedOrigins.includes(origin)) {
      return jsonError(response, 403, -32000, `origin ${origin} is not allowed`);
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
      const code = error instanceof DomainError ? error.code : 16;
      if (code === 8) return jsonError(response, 429, -32002, (error as Error).message);
      if (code === 14) return jsonError(response, 503, -32001, (error as Error).message);
      const revoked = await revokedSessionKey(request, sessionId);
      if (revoked === undefined) {
        response.setHeader("www-authenticate", 'Bearer realm="unimatrix"');
        return jsonError(response, 401, -32001, (error as Error).message);
      }
      // The session's own credential, revoked since: its tool calls answer as tool errors saying
      // so (every tool re-authenticates), never as a bare transport failure; nothing else is served.
      credentialKey = revoked;
      revokedSession = true;
    }
    if (!(await deps.limiter.take(credentialKey))) {
      return jsonError(response, 429, -32002, "rate limit exceeded for this credential; slow down");
    }
    let body: unknown;
    if (request.method === "POST") {
      try {
        body = await readJson(request, deps.maxBodyBytes);
      } catch (error) {
        return jsonError(response, error instanceof RangeError ? 413 : 400, -32700, (error as Error).message);
      }
    }
    if (revokedSession && !onlyToolCalls(body)) {
      response.setHeader("www-authenticate", 'Bearer realm="unimatrix", error="invalid_token"');
      return jsonError(
        response,
        401,
        -32001,
        "this session's credential was revoked; only tool calls answer (saying so)",
      );
    }
    if (typeof sessionId === "string") {
      const record = await deps.sessions.get(sessionId);
      if (!record || record.credentialKey !== credentialKey) {
        return jsonError(response, 404, -32001, "session not found");
      }
      void deps.sessions.touch(sessionId, record).catch(() => {});
      if (request.method === "GET") {
        // Counted against the credential's stream cap (with its SSE streams) and the session's.
        const slots = await openPushSlots(deps, credentialKey, sessionId);
        if (typeof slots === "string") return jsonError(response, 429, -32002, slots);
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
      return jsonError(response, 400, -32000, "no session: start with an initialize request");
    }
    const id = await deps.sessions.create(credentialKey);
    deps.onSessionEvent?.(id ? "opened" : "refused");
    if (!id) {
      const held = await deps.sessions.held(credentialKey);
      return jsonError(response, 429, -32002, `this credential already holds ${held} MCP sessions; close one first`);
    }
    return serve(request, response, id, { credentialKey }, body);
  };

  return {
    handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
      return handle(request, response).catch((error: unknown) => {
        if (response.headersSent) return void response.end();
        const known = error instanceof DomainError || isServiceError(error);
        jsonError(response, known ? 400 : 500, -32603, known ? (error as Error).message : "internal error");
      });
    },
    /** Ends this replica's push streams (gateway shutdown); the sessions live on in the fleet. */
    async close(): Promise<void> {
      for (const response of [...pushes]) response.end();
    },
  };
}
