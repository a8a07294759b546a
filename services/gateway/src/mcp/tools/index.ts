import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { ListToolsRequestSchema, type ListToolsResult } from "@modelcontextprotocol/sdk/types.js";
import type { McpServer as StatelessServer } from "@modelcontextprotocol/server";
import { AttachSeatRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { contractString } from "../contract-schema";
import type { McpSession } from "../session";
import { type McpTasks, wantsTasks } from "../tasks";
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
import { logWait, parkedWait } from "./log-wait";
import { machinesList } from "./machines-list";
import { receipts } from "./receipts";
import { schemaOnce } from "./schema-once";
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

/** What a 2026-07-28 host is told: the same, with the seat passed along instead of held by a session. */
export const INSTRUCTIONS_STATELESS = [
  "Unimatrix: a team of agents working in a cube, talking through its activity log.",
  "1. seat_attach {cube_id} takes a seat (a drone) and shows the directive; pass its session_token as `seat` on every later call (it is your seat on any gateway, any time: no need to attach again).",
  "2. log_read returns what reached you since you last read (one line per entry: #position author → audience: message).",
  "3. log_wait blocks until something new arrives (use it when you have nothing to do); or listen to unimatrix://inbox?seat=<session_token>[&after=<cursor>].",
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

/** Tools that act as no drone (they name what they read, or take the seat): no `seat` input. */
const SEATLESS = new Set(["cube_list", "seat_attach", "machines_list", "device_placement_get"]);

/** The seat on 2026-07-28, where no session holds it: the `session_token` seat_attach gave. */
const seatInput = contractString(AttachSeatRequestSchema, "session_token").optional();

/** The tools as 2026-07-28 shows them: every tool that acts as the drone takes the seat as an input. */
const STATELESS_TOOLS: readonly McpTool[] = TOOLS.map((tool) =>
  SEATLESS.has(tool.name) ? tool : { ...tool, input: { ...tool.input, seat: seatInput } },
);

/** The 2026-07-28 tools' schemas, built and converted once per process (a server is built per request). */
const STATELESS_SCHEMAS = new Map(
  STATELESS_TOOLS.map((tool) => [tool.name, { input: schemaOnce(tool.input), output: schemaOnce(tool.output) }]),
);

let statelessList: ListToolsResult | undefined;

const STATELESS_BY_NAME = new Map(STATELESS_TOOLS.map((tool) => [tool.name, tool]));

/**
 * Registers the tools on a 2026-07-28 server (SDK v2) built for one request, with the lean
 * `tools/list` (the same order every time, so a host's prompt cache hits). A `seat` input names the
 * drone the call acts as; without one the call acts as the bearer (a drone session token as
 * bearer is its own seat). `only`: the tool a `tools/call` names, the one such a server needs
 * (every tool when it names none of them, so that the SDK answers an unknown name as always).
 */
export function registerStatelessTools(
  server: StatelessServer,
  session: McpSession,
  tasks?: McpTasks,
  only?: string,
): void {
  const named = only === undefined ? undefined : STATELESS_BY_NAME.get(only);
  for (const tool of named ? [named] : STATELESS_TOOLS) {
    const schemas = STATELESS_SCHEMAS.get(tool.name);
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: schemas?.input,
        outputSchema: schemas?.output,
        annotations: tool.annotations,
      },
      (async (
        { seat, ...input }: Record<string, unknown>,
        ctx: { mcpReq: { signal: AbortSignal; envelope?: unknown } },
      ) =>
        session.guard(async () => {
          if (typeof seat === "string") await session.useSeat(seat);
          // A wait from a host that takes tasks: parked as a task when nothing is there yet.
          if (tasks && tool.name === "log_wait" && wantsTasks(ctx)) {
            const parked = await parkedWait(session, input, ctx.mcpReq.signal);
            if (parked) return tasks.wait(session, parked.from, parked.filter, parked.timeoutMs) as never;
          }
          const result = await tool.run(session, input as never, ctx.mcpReq.signal);
          // A question to the cube's humans, from a host that takes tasks: a handle to poll, not a wait.
          if (tasks && tool.name === "log_post" && input.ask_human === true && !result.isError && wantsTasks(ctx)) {
            return tasks.question(session, result.structuredContent as { n: number; id: string }) as never;
          }
          return result;
        }, tool.name)) as never,
    );
  }
  server.server.setRequestHandler("tools/list", () => {
    statelessList ??= toolList(STATELESS_TOOLS);
    return statelessList as never;
  });
}
