import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { ListToolsRequestSchema, type ListToolsResult } from "@modelcontextprotocol/sdk/types.js";
import type { McpSession } from "../session";
import { cubeGet } from "./cube-get";
import { cubeList } from "./cube-list";
import { decisionList } from "./decision-list";
import { decisionRecord } from "./decision-record";
import { devicePlacementGet } from "./device-placement-get";
import { directiveUpdate } from "./directive-update";
import { dronesList } from "./drones-list";
import { toolList } from "./list";
import { logAck } from "./log-ack";
import { logClaim } from "./log-claim";
import { logPost } from "./log-post";
import { logRead } from "./log-read";
import { logWait } from "./log-wait";
import { machinesList } from "./machines-list";
import { receipts } from "./receipts";
import { seatAttach } from "./seat-attach";
import { seatState } from "./seat-state";
import type { McpTool } from "./spec";

/** What `initialize` tells the host about using these tools (a few lines: attach, read, wait, post). */
export const INSTRUCTIONS = [
  "Unimatrix: a team of agents working in a cube, talking through its activity log.",
  "1. seat_attach {cube_id} takes a seat (a drone) and shows the directive; keep its session_token to resume the seat later.",
  "2. log_read returns what reached you since you last read (one line per entry: #position author → audience: message).",
  "3. log_wait blocks until something new arrives (use it when you have nothing to do; new activity is also pushed as log notifications).",
  "4. log_post says something (to all, or to drones by label); log_ack / log_claim take an entry as #position or id.",
].join("\n");

/** Every tool, in the order `tools/list` shows them. */
const TOOLS: readonly McpTool[] = [
  cubeList,
  cubeGet,
  seatAttach,
  logPost,
  logRead,
  logWait,
  logAck,
  logClaim,
  dronesList,
  decisionRecord,
  decisionList,
  directiveUpdate,
  seatState,
  receipts,
  machinesList,
  devicePlacementGet,
];

/** Registers the Unimatrix tools on an MCP server bound to one session (the SDK checks inputs and outputs). */
export function registerTools(server: McpServer, session: McpSession): void {
  for (const tool of TOOLS) {
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: tool.input,
        outputSchema: tool.output,
        annotations: tool.annotations,
      },
      (async (input: Record<string, unknown>, extra: { signal: AbortSignal }) =>
        session.guard(() => tool.run(session, input as never, extra.signal), tool.name)) as never,
    );
  }
}

let list: ListToolsResult | undefined;

/**
 * Answers `tools/list` with the lean list (see `toolList`) through the server's public
 * `setRequestHandler`, replacing the SDK's default answer; the same for every session, so it is
 * computed once per process. Call after `registerTools`.
 */
export function serveToolList(server: McpServer): void {
  server.server.setRequestHandler(ListToolsRequestSchema, () => {
    list ??= toolList(TOOLS);
    return list;
  });
}
