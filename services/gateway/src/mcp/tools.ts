import { type DescMessage, type MessageShape, toJson } from "@bufbuild/protobuf";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  AppendEntryRequestSchema,
  ClaimOutcome,
  ListDecisionsResponseSchema,
  ReadActivityResponseSchema,
  ReadUnreadResponseSchema,
  RecordDecisionRequestSchema,
  ReleaseOutcome,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import {
  AttachSeatOutcome,
  AttachSeatRequestSchema,
  GetCubeRequestSchema,
  GetCubeResponseSchema,
  ListCubesResponseSchema,
  ListDronesResponseSchema,
  UpdateCubeRequestSchema,
  UpdateCubeResponseSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import {
  ClaimSchema,
  DecisionSchema,
  EntrySchema,
  RoleSchema,
  Visibility,
} from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import {
  GetPlacementRequestSchema,
  GetPlacementResponseSchema,
} from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { ListMachinesResponseSchema } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { maxItems } from "@unimatrix/service-kit";
import { z } from "zod";
import { contractString } from "./contract-schema";
import type { McpSession } from "./session";

// Every id of the contract carries the same rule (canonical lowercase UUID).
const uuid = contractString(GetCubeRequestSchema, "cube_id");
const pageSize = z.number().int().min(1).max(500).optional().describe("Most items to return (default 50).");
const pageToken = z.string().optional().describe("next_page_token from a previous call.");

/** Canonical protobuf JSON of a message, as structured content. */
function json<D extends DescMessage>(schema: D, message: MessageShape<D>): Record<string, unknown> {
  return toJson(schema, message, { alwaysEmitImplicit: false }) as Record<string, unknown>;
}

function ok(text: string, structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: "text", text }], structuredContent: structured };
}

/** Registers exactly the thirteen Unimatrix tools on an MCP server bound to one session. */
export function registerTools(server: McpServer, session: McpSession): void {
  const tool = <S extends z.ZodRawShape>(
    name: string,
    description: string,
    inputSchema: S,
    run: (input: z.infer<z.ZodObject<S>>, signal: AbortSignal) => Promise<CallToolResult>,
  ) => {
    server.registerTool(name, { description, inputSchema }, (async (
      input: z.infer<z.ZodObject<S>>,
      extra: { signal: AbortSignal },
    ) => session.guard(() => run(input, extra.signal), name)) as never);
  };

  tool(
    "cube_list",
    "List the cubes you can see.",
    { page_size: pageSize, page_token: pageToken },
    async (input, signal) => {
      const reply = await session.upstreams.cube.listCubes(
        { pageSize: input.page_size ?? 0, pageToken: input.page_token ?? "" },
        await session.asCaller(signal),
      );
      const names = reply.cubes.map((c) => `${c.name} (${c.id})`).join(", ") || "none";
      return ok(`${reply.cubes.length} cube(s): ${names}`, json(ListCubesResponseSchema, reply));
    },
  );

  tool(
    "cube_get",
    "A cube's directive, taxonomy and roles. Defaults to the cube of your seat.",
    { cube_id: uuid.optional() },
    async (input, signal) => {
      const cubeId = session.cubeId(input.cube_id);
      const options = await session.asFor(input.cube_id, signal);
      const [cube, roles] = await Promise.all([
        session.upstreams.cube.getCube({ cubeId }, options),
        session.upstreams.cube.listRoles({ cubeId, pageSize: 500 }, await session.asFor(input.cube_id, signal)),
      ]);
      const structured = { ...json(GetCubeResponseSchema, cube), roles: roles.roles.map((r) => json(RoleSchema, r)) };
      return ok(
        `${cube.cube?.name}: ${cube.cube?.directive || "(no directive)"}; ${roles.roles.length} role(s)`,
        structured,
      );
    },
  );

  tool(
    "seat_attach",
    "Take a seat (a drone) in a cube's role. After this, every call acts as that drone and new activity is pushed to you.",
    {
      cube_id: uuid,
      role_id: uuid,
      prior_drone_id: uuid.optional().describe("Reattach to a drone you held before (when no live session holds it)."),
      session_token: z
        .string()
        .regex(/^umx_drone_[A-Za-z0-9-]+_[A-Za-z0-9-]+$/, "must be a saved umx_drone_… session token")
        .optional()
        .describe("The session_token a previous seat_attach returned: resumes that seat (outcome reused)."),
      hostname: contractString(AttachSeatRequestSchema, "hostname").optional(),
    },
    async (input, signal) => {
      const reply = await session.attach(input.cube_id, input.role_id, {
        priorDroneId: input.prior_drone_id,
        sessionToken: input.session_token,
        hostname: input.hostname,
        signal,
      });
      if (reply.outcome === AttachSeatOutcome.SESSION_REJECTED) {
        return {
          isError: true,
          content: [{ type: "text", text: "SESSION_REJECTED: the saved seat session is no longer valid" }],
        };
      }
      const outcome = reply.outcome === AttachSeatOutcome.REUSED ? "reused" : "created";
      const drone = reply.drone;
      return ok(`Seat ${outcome}: you are ${drone?.label} (${drone?.id}) in role ${drone?.roleName}`, {
        outcome,
        drone_id: drone?.id ?? "",
        label: drone?.label ?? "",
        role: drone?.roleName ?? "",
        cube_id: input.cube_id,
        // Shown once, on a new session: keep it to resume this seat from a later MCP session.
        ...(reply.sessionToken ? { session_token: reply.sessionToken } : {}),
      });
    },
  );

  tool(
    "log_post",
    "Post to the cube's activity log: broadcast to everyone, or direct to listed drones.",
    {
      message: contractString(AppendEntryRequestSchema, "message"),
      visibility: z.enum(["broadcast", "direct"]).default("broadcast"),
      recipients: z
        .array(contractString(AppendEntryRequestSchema, "recipient_drone_ids"))
        .max(maxItems(AppendEntryRequestSchema, "recipient_drone_ids") ?? 100)
        .optional()
        .describe("Drone ids; required for direct."),
      kind: contractString(AppendEntryRequestSchema, "kind")
        .optional()
        .describe("A message kind from the cube's taxonomy."),
    },
    async (input, signal) => {
      const reply = await session.upstreams.activity.appendEntry(
        {
          cubeId: session.cubeId(),
          message: input.message,
          visibility: input.visibility === "direct" ? Visibility.DIRECT : Visibility.BROADCAST,
          recipientDroneIds: input.recipients ?? [],
          ...(input.kind !== undefined ? { kind: input.kind } : {}),
        },
        await session.asActor(signal),
      );
      return ok(`Posted ${input.visibility} entry ${reply.entry?.id}`, json(EntrySchema, reply.entry!));
    },
  );

  tool(
    "log_read",
    "Read the activity log. With unread: what reached you since you last read (your inbox); otherwise pages from a cursor.",
    { unread: z.boolean().default(false), cursor: z.string().optional(), page_size: pageSize },
    async (input, signal) => {
      const cubeId = session.cubeId();
      if (input.unread) {
        const reply = await session.upstreams.activity.readUnread(
          { cubeId, pageSize: input.page_size ?? 0 },
          await session.asActor(signal),
        );
        return ok(
          `${reply.items.length} unread item(s)${reply.hasMore ? ", more waiting" : ""}`,
          json(ReadUnreadResponseSchema, reply),
        );
      }
      const reply = await session.upstreams.activity.readActivity(
        { cubeId, cursor: input.cursor ?? "", pageSize: input.page_size ?? 0 },
        await session.asActor(signal),
      );
      return ok(
        `${reply.items.length} item(s)${reply.hasMore ? `, more after ${reply.nextCursor}` : ""}`,
        json(ReadActivityResponseSchema, reply),
      );
    },
  );

  tool("log_ack", "Acknowledge an entry; its author is told.", { entry_id: uuid }, async (input, signal) => {
    const reply = await session.upstreams.activity.ackEntry(
      { cubeId: session.cubeId(), entryId: input.entry_id },
      await session.asActor(signal),
    );
    return ok(reply.newlyAcked ? "Acknowledged" : "Already acknowledged", {
      newly_acked: reply.newlyAcked,
      entry: json(EntrySchema, reply.entry!),
    });
  });

  tool(
    "log_claim",
    "Claim an entry exclusively (the audience is told), or release your claim.",
    { entry_id: uuid, release: z.boolean().default(false) },
    async (input, signal) => {
      const target = { cubeId: session.cubeId(), entryId: input.entry_id };
      if (input.release) {
        const reply = await session.upstreams.activity.releaseClaim(target, await session.asActor(signal));
        const outcome = ReleaseOutcome[reply.outcome].toLowerCase();
        return ok(`Release: ${outcome}`, {
          outcome,
          ...(reply.claim ? { claim: json(ClaimSchema, reply.claim) } : {}),
        });
      }
      const reply = await session.upstreams.activity.claimEntry(target, await session.asActor(signal));
      const outcome = ClaimOutcome[reply.outcome].toLowerCase();
      const holder = reply.claim?.holderDroneId ?? "";
      const text = reply.outcome === ClaimOutcome.ALREADY_CLAIMED ? `already_claimed by ${holder}` : outcome;
      return ok(`Claim: ${text}`, {
        outcome,
        holder_drone_id: holder,
        ...(reply.claim ? { claim: json(ClaimSchema, reply.claim) } : {}),
      });
    },
  );

  tool(
    "drones_list",
    "The drones of a cube with posture and last seen. Defaults to your seat's cube.",
    { cube_id: uuid.optional() },
    async (input, signal) => {
      const reply = await session.upstreams.cube.listDrones(
        { cubeId: session.cubeId(input.cube_id), pageSize: 500 },
        await session.asFor(input.cube_id, signal),
      );
      return ok(`${reply.drones.length} drone(s)`, json(ListDronesResponseSchema, reply));
    },
  );

  tool(
    "decision_record",
    "Record a decision, optionally tied to the entry it settles.",
    {
      title: contractString(RecordDecisionRequestSchema, "title"),
      rationale: contractString(RecordDecisionRequestSchema, "rationale").default(""),
      entry_id: uuid.optional(),
    },
    async (input, signal) => {
      const reply = await session.upstreams.activity.recordDecision(
        {
          cubeId: session.cubeId(),
          title: input.title,
          rationale: input.rationale,
          ...(input.entry_id !== undefined ? { entryId: input.entry_id } : {}),
        },
        await session.asActor(signal),
      );
      return ok(`Recorded decision ${reply.decision?.id}`, json(DecisionSchema, reply.decision!));
    },
  );

  tool(
    "decision_list",
    "The cube's decisions, newest last.",
    { page_size: pageSize, page_token: pageToken },
    async (input, signal) => {
      const reply = await session.upstreams.activity.listDecisions(
        { cubeId: session.cubeId(), pageSize: input.page_size ?? 0, pageToken: input.page_token ?? "" },
        await session.asActor(signal),
      );
      return ok(`${reply.decisions.length} decision(s)`, json(ListDecisionsResponseSchema, reply));
    },
  );

  tool(
    "directive_update",
    "Replace a cube's directive (manage access). Defaults to your seat's cube.",
    { directive: contractString(UpdateCubeRequestSchema, "directive"), cube_id: uuid.optional() },
    async (input, signal) => {
      const reply = await session.upstreams.cube.updateCube(
        { cubeId: session.cubeId(input.cube_id), directive: input.directive },
        await session.asFor(input.cube_id, signal),
      );
      return ok("Directive updated", json(UpdateCubeResponseSchema, reply));
    },
  );

  tool(
    "machines_list",
    "Your tenant's machines and whether each is linked now.",
    { page_size: pageSize, page_token: pageToken },
    async (input, signal) => {
      const reply = await session.upstreams.machine.listMachines(
        { pageSize: input.page_size ?? 0, pageToken: input.page_token ?? "" },
        await session.asCaller(signal),
      );
      const linked = reply.machines.filter((m) => m.linked).length;
      return ok(`${reply.machines.length} machine(s), ${linked} linked`, json(ListMachinesResponseSchema, reply));
    },
  );

  tool(
    "device_placement_get",
    "Which device a root agent session is placed on.",
    {
      root_session_id: contractString(GetPlacementRequestSchema, "root_session_id"),
    },
    async (input, signal) => {
      const reply = await session.upstreams.placement.getPlacement(
        { rootSessionId: input.root_session_id },
        await session.asCaller(signal),
      );
      return ok(`Placed on device ${reply.placement?.deviceId ?? "(none)"}`, json(GetPlacementResponseSchema, reply));
    },
  );
}
