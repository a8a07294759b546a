import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { DomainError, isServiceError } from "@unimatrix/service-kit";
import { chargeAddress } from "../forward";
import type { RateLimiter } from "../rate-limit";
import { McpSession, type McpSessionDeps } from "./session";
import { registerTools } from "./tools";

/** What the `/mcp` endpoint needs. */
export interface McpDeps extends McpSessionDeps {
  readonly limiter: RateLimiter;
  readonly maxBodyBytes: number;
  /** Origins allowed to use `/mcp` from a browser (`*` = any); a request without Origin is allowed. */
  readonly allowedOrigins: readonly string[];
  readonly onSession?: (delta: 1 | -1) => void;
}

interface Open {
  readonly transport: StreamableHTTPServerTransport;
  readonly session: McpSession;
}

/** A session unused this long is closed (its push stream with it); the client starts a new one. */
export const MCP_IDLE_MS = 30 * 60_000;
/** Open sessions one credential may hold; a further initialize answers 429. */
export const MCP_MAX_SESSIONS_PER_CREDENTIAL = 32;

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

/**
 * MCP over streamable HTTP at `/mcp`. Every request carries the bearer token; a session belongs to
 * the credential that opened it and answers 404 to any other.
 */
export function mcpHandler(deps: McpDeps) {
  const open = new Map<string, Open>();
  const sweep = setInterval(() => {
    const idleBefore = Date.now() - MCP_IDLE_MS;
    for (const { transport, session } of [...open.values()]) {
      if (session.lastUsed < idleBefore) void transport.close();
    }
  }, 60_000);
  sweep.unref();

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    // DNS-rebinding protection (MCP spec): a browser's Origin must be on the allow-list.
    const origin = request.headers.origin;
    if (origin !== undefined && !deps.allowedOrigins.includes("*") && !deps.allowedOrigins.includes(origin)) {
      return jsonError(response, 403, -32000, `origin ${origin} is not allowed`);
    }
    let caller: Awaited<ReturnType<typeof deps.auth.authenticate>>;
    try {
      caller = await deps.auth.authenticate(request.headers.authorization, () =>
        chargeAddress(deps.limiter, request.socket.remoteAddress ?? ""),
      );
    } catch (error) {
      const code = error instanceof DomainError ? error.code : 16;
      if (code === 8) return jsonError(response, 429, -32002, (error as Error).message);
      if (code === 14) return jsonError(response, 503, -32001, (error as Error).message);
      response.setHeader("www-authenticate", 'Bearer realm="unimatrix"');
      return jsonError(response, 401, -32001, (error as Error).message);
    }
    if (!deps.limiter.take(caller.credentialKey)) {
      return jsonError(response, 429, -32002, "rate limit exceeded for this credential; slow down");
    }
    const sessionId = request.headers["mcp-session-id"];
    const existing = typeof sessionId === "string" ? open.get(sessionId) : undefined;
    if (existing && existing.session.caller.credentialKey !== caller.credentialKey) {
      return jsonError(response, 404, -32001, "session not found");
    }
    let body: unknown;
    if (request.method === "POST") {
      try {
        body = await readJson(request, deps.maxBodyBytes);
      } catch (error) {
        return jsonError(response, error instanceof RangeError ? 413 : 400, -32700, (error as Error).message);
      }
    }
    if (existing) {
      existing.session.touch();
      return existing.transport.handleRequest(request, response, body);
    }
    if (typeof sessionId === "string") return jsonError(response, 404, -32001, "session not found");
    if (request.method !== "POST" || !isInitializeRequest(body)) {
      return jsonError(response, 400, -32000, "no session: start with an initialize request");
    }
    const held = [...open.values()].filter((o) => o.session.caller.credentialKey === caller.credentialKey).length;
    if (held >= MCP_MAX_SESSIONS_PER_CREDENTIAL) {
      return jsonError(response, 429, -32002, `this credential already holds ${held} MCP sessions; close one first`);
    }
    const session = new McpSession(deps, request.headers.authorization ?? "", caller);
    const server = new McpServer(SERVER_INFO, { capabilities: { logging: {} } });
    session.bind(server);
    registerTools(server, session);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        open.set(id, { transport, session });
        deps.onSession?.(1);
      },
    });
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id && open.delete(id)) deps.onSession?.(-1);
      session.close();
    };
    await server.connect(transport);
    await transport.handleRequest(request, response, body);
  };

  return {
    handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
      return handle(request, response).catch((error: unknown) => {
        if (response.headersSent) return void response.end();
        const known = error instanceof DomainError || isServiceError(error);
        jsonError(response, known ? 400 : 500, -32603, known ? (error as Error).message : "internal error");
      });
    },
    /** Closes every session (gateway shutdown). */
    async close(): Promise<void> {
      clearInterval(sweep);
      for (const { transport } of [...open.values()]) await transport.close();
    },
  };
}
