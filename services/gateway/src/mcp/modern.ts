import type { IncomingMessage, ServerResponse } from "node:http";
import { classifyInboundRequest, createMcpHandler, type JSONRPCRequest, McpServer } from "@modelcontextprotocol/server";
import { listenOf } from "./listen";
import { nodeEntry } from "./node-entry";
import { McpSession, type McpSessionDeps, seatOf } from "./session";
import { McpTasks, TASKS_EXTENSION } from "./tasks";
import { INSTRUCTIONS_STATELESS, registerStatelessTools } from "./tools";

/** The name and release the gateway reports to MCP clients (the root package.json's version; a test holds them equal). */
export const SERVER_INFO = { name: "unimatrix", version: "0.2.0" };

/** What the 2026-07-28 leg needs. */
export interface StatelessDeps extends McpSessionDeps {
  readonly maxBodyBytes: number;
}

/** How long a host may keep `tools/list` and `server/discover` (the same for every caller). */
const LIST_TTL_MS = 60 * 60 * 1000;

/**
 * MCP revision 2026-07-28 on `/mcp`, served by the SDK's per-request entry: no `initialize`, no
 * session; `server/discover`, the `_meta` envelope, `Mcp-Method`/`Mcp-Name` checks and cache hints
 * are the SDK's. Each request gets a server of its own, acting as its bearer; the seat travels
 * with the agent (its session token as the `seat` input, or as the bearer), so any replica serves
 * any call and a returning agent attaches nothing. Authentication, the rate limit and the Origin
 * check happen before (the `/mcp` door in `handler.ts`).
 */
export function statelessMcp(deps: StatelessDeps) {
  const tasks = new McpTasks(deps.internalKey);
  const entry = createMcpHandler(
    async ({ requestInfo }) => {
      const authorization = requestInfo?.headers.get("authorization") ?? "";
      const credentialKey = deps.auth.credentialKeyOf(authorization) ?? "";
      // A drone session token as bearer is its own seat.
      const seat = (await seatOf(deps.auth, authorization.replace(/^Bearer\s+/i, "")))?.seat;
      const session = new McpSession(deps, { credentialKey, seat }, authorization, async () => undefined);
      const server = new McpServer(SERVER_INFO, {
        capabilities: { tools: {}, extensions: { [TASKS_EXTENSION]: {} } },
        instructions: INSTRUCTIONS_STATELESS,
        cacheHints: {
          "tools/list": { ttlMs: LIST_TTL_MS, cacheScope: "public" },
          "server/discover": { ttlMs: LIST_TTL_MS, cacheScope: "public" },
        },
      });
      registerStatelessTools(server, session, tasks);
      tasks.register(server, session);
      return server;
    },
    {
      legacy: "reject",
      maxRequestBodySize: deps.maxBodyBytes,
      onerror: (error) => deps.logger.debug({ err: error }, "mcp 2026-07-28 request refused"),
    },
  );
  const serve = nodeEntry(entry, (error) => deps.logger.warn({ err: error }, "mcp 2026-07-28 entry failed"));
  return {
    /**
     * Who serves the request, as the SDK's own classifier decides the era: `legacy` (2025-11-25:
     * no `_meta` envelope, GET, DELETE), a `subscriptions/listen` for the seat's inbox or for task
     * notifications (served by `serveListen`), or the SDK's 2026-07-28 entry (which also answers
     * every rejection).
     */
    route(request: IncomingMessage, body: unknown): "legacy" | "sdk" | { readonly listen: JSONRPCRequest } {
      const header = (name: string) => {
        const value = request.headers[name];
        return typeof value === "string" ? value : undefined;
      };
      const outcome = classifyInboundRequest({
        httpMethod: request.method ?? "GET",
        protocolVersionHeader: header("mcp-protocol-version"),
        mcpMethodHeader: header("mcp-method"),
        mcpNameHeader: header("mcp-name"),
        body,
      });
      if (outcome.kind === "legacy") return "legacy";
      if (
        outcome.kind === "modern" &&
        outcome.messageKind === "request" &&
        outcome.message.method === "subscriptions/listen" &&
        listenOf(outcome.message) !== undefined
      ) {
        return { listen: outcome.message };
      }
      return "sdk";
    },
    serve(request: IncomingMessage, response: ServerResponse, body: unknown): Promise<void> {
      return serve(request, response, body);
    },
    /** The task registry `tasks/get` answers from, which a listen's task notifications read too. */
    tasks,
    close: () => entry.close(),
  };
}
