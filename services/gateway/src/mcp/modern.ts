import type { IncomingMessage, ServerResponse } from "node:http";
import { toNodeHandler, toWebRequest } from "@modelcontextprotocol/node";
import { createMcpHandler, isLegacyRequest, McpServer } from "@modelcontextprotocol/server";
import { McpSession, type McpSessionDeps } from "./session";
import type { SeatRecord } from "./session-store";
import { INSTRUCTIONS_STATELESS, registerStatelessTools } from "./tools";

/** The name and version the gateway reports to MCP clients. */
export const SERVER_INFO = { name: "unimatrix", version: "0.1.0" };

/** What the 2026-07-28 leg needs. */
export interface StatelessDeps extends McpSessionDeps {
  readonly maxBodyBytes: number;
}

/** How long a host may keep `tools/list` and `server/discover` (the same for every caller). */
const LIST_TTL_MS = 60 * 60 * 1000;

/** The seat a bearer is by itself: a drone session token as bearer acts as its drone. */
async function bearerSeat(deps: McpSessionDeps, authorization: string): Promise<SeatRecord | undefined> {
  const { principal } = await deps.auth.authenticate(authorization);
  if (principal.kind !== "drone-session") return undefined;
  const token = authorization.replace(/^Bearer\s+/i, "");
  return { cubeId: principal.cubeId, roleId: "", droneId: principal.droneId, token };
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
  const entry = createMcpHandler(
    async ({ requestInfo }) => {
      const authorization = requestInfo?.headers.get("authorization") ?? "";
      const credentialKey = deps.auth.credentialKeyOf(authorization) ?? "";
      const seat = await bearerSeat(deps, authorization);
      const session = new McpSession(deps, { credentialKey, seat }, authorization, async () => undefined);
      const server = new McpServer(SERVER_INFO, {
        capabilities: { tools: {} },
        instructions: INSTRUCTIONS_STATELESS,
        cacheHints: {
          "tools/list": { ttlMs: LIST_TTL_MS, cacheScope: "public" },
          "server/discover": { ttlMs: LIST_TTL_MS, cacheScope: "public" },
        },
      });
      registerStatelessTools(server, session);
      return server;
    },
    {
      legacy: "reject",
      maxRequestBodySize: deps.maxBodyBytes,
      onerror: (error) => deps.logger.debug({ err: error }, "mcp 2026-07-28 request refused"),
    },
  );
  const serve = toNodeHandler(entry, { maxRequestBodySize: deps.maxBodyBytes });
  return {
    /** True when the request speaks 2026-07-28 (or claims to: its errors are this leg's to answer). */
    async claims(request: IncomingMessage, body: unknown): Promise<boolean> {
      if (request.method !== "POST") return false;
      return !(await isLegacyRequest(await toWebRequest(request, body), body));
    },
    serve(request: IncomingMessage, response: ServerResponse, body: unknown): Promise<void> {
      return serve(request, response, body);
    },
    close: () => entry.close(),
  };
}
