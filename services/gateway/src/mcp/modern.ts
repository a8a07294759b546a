import type { IncomingMessage, ServerResponse } from "node:http";
import {
  type AuthInfo,
  classifyInboundRequest,
  createMcpHandler,
  type JSONRPCRequest,
  McpServer,
} from "@modelcontextprotocol/server";
import type { EdgeCaller } from "../auth";
import { listenOf } from "./listen";
import { nodeEntry } from "./node-entry";
import { McpSession, type McpSessionDeps } from "./session";
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

/** Where the authenticated caller rides in the SDK's `authInfo.extra` from the door to the factory. */
const CALLER = "unimatrix.caller";

/** The first 2026-07-28-era revision (revisions are dates: a later one compares greater). */
const FIRST_MODERN_REVISION = "2026-07-28";

/**
 * True for a request the SDK's classifier could only send to its own entry: a POST naming a
 * 2026-07-28-era revision in `MCP-Protocol-Version`, its body one JSON-RPC request or notification
 * (an object with a method, no result or error: never a batch or a posted response, the only
 * bodies such a header still leaves to the 2025 leg), and not a `subscriptions/listen`. The SDK's
 * entry classifies it again (and refuses what is malformed); this spares the door a second run of
 * the classifier's schema checks on every tool call.
 */
export function plainlyModern(method: string | undefined, version: string | undefined, body: unknown): boolean {
  if (method !== "POST" || version === undefined || version.replace(/^[ \t]+|[ \t]+$/g, "") < FIRST_MODERN_REVISION) {
    return false;
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  const message = body as Record<string, unknown>;
  return (
    typeof message.method === "string" &&
    message.method !== "subscriptions/listen" &&
    !("result" in message) &&
    !("error" in message)
  );
}

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
    ({ requestInfo, authInfo }) => {
      // The caller `/mcp` authenticated (see `serve`); a drone session token as bearer is its own seat.
      const caller = authInfo?.extra?.[CALLER] as EdgeCaller;
      const { principal } = caller;
      const seat =
        principal.kind === "drone-session"
          ? { cubeId: principal.cubeId, roleId: "", droneId: principal.droneId, token: authInfo?.token ?? "" }
          : undefined;
      const authorization = requestInfo?.headers.get("authorization") ?? "";
      const session = new McpSession(
        deps,
        { credentialKey: caller.credentialKey, seat },
        authorization,
        async () => undefined,
      );
      const server = new McpServer(SERVER_INFO, {
        capabilities: { tools: {}, extensions: { [TASKS_EXTENSION]: {} } },
        instructions: INSTRUCTIONS_STATELESS,
        cacheHints: {
          "tools/list": { ttlMs: LIST_TTL_MS, cacheScope: "public" },
          "server/discover": { ttlMs: LIST_TTL_MS, cacheScope: "public" },
        },
      });
      // A tool call registers the tool it names (the SDK has checked `Mcp-Name` against the body).
      const called =
        requestInfo?.headers.get("mcp-method") === "tools/call" ? requestInfo.headers.get("mcp-name") : null;
      registerStatelessTools(server, session, tasks, called ?? undefined);
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
      if (plainlyModern(request.method, header("mcp-protocol-version"), body)) return "sdk";
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
    /** Serves a request `/mcp` authenticated as `caller` (handed to the server factory, not looked up again). */
    serve(request: IncomingMessage, response: ServerResponse, body: unknown, caller: EdgeCaller): Promise<void> {
      const token = (request.headers.authorization ?? "").replace(/^Bearer\s+/i, "");
      const authInfo: AuthInfo = { token, clientId: caller.credentialKey, scopes: [], extra: { [CALLER]: caller } };
      return serve(request, response, body, authInfo);
    },
    /** The task registry `tasks/get` answers from, which a listen's task notifications read too. */
    tasks,
    close: () => entry.close(),
  };
}
