import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { status } from "@grpc/grpc-js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import {
  AppendEntryRequestSchema,
  ClaimOutcome,
  RecordDecisionRequestSchema,
  ReleaseOutcome,
  RenewOutcome,
  TakeOverOutcome,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import {
  AttachSeatOutcome,
  AttachSeatRequestSchema,
  GetCubeRequestSchema,
  SetSeatStateRequestSchema,
  UpdateCubeRequestSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import {
  type ActivityItem,
  ClaimState,
  CubeAccess,
  DeliveryChannel,
  type Drone,
  DronePosture,
  type Entry,
  RoleClass,
  SeatState,
  Visibility,
} from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { GetPlacementRequestSchema } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { InvalidArgumentError, NotFoundError } from "@unimatrix/service-kit/errors";
import { maxItems, toStatus } from "@unimatrix/service-kit/grpc";
import { z } from "zod";
import { contractString } from "./contract-schema";
import {
  claimNote,
  cursorBefore,
  positionOf,
  preview,
  renderEntry,
  renderItems,
  SESSION_REJECTED_TEXT,
  secondsTime,
  shortTime,
  stateName,
  summaryLine,
  unlabelled,
  type Viewer,
} from "./format";
import type { McpSession, UnreadPage } from "./session";
import { waitForUnread } from "./wait";

/** What `initialize` tells the host about using these tools (a few lines: attach, read, wait, post). */
export const INSTRUCTIONS = [
  "Unimatrix: a team of agents working in a cube, talking through its activity log.",
  "1. seat_attach {cube_id} takes a seat (a drone) and shows the directive; keep its session_token to resume the seat later.",
  "2. log_read returns what reached you since you last read (one line per entry: #position author → audience: message).",
  "3. log_wait blocks until something new arrives (use it when you have nothing to do; new activity is also pushed as log notifications).",
  "4. log_post says something (to all, or to drones by label); log_ack / log_claim take an entry as #position or id.",
].join("\n");

const uuid = contractString(GetCubeRequestSchema, "cube_id");
const pageSize = z.number().int().positive().max(500).optional();
const pageToken = z.string().max(1024).optional();
/** An entry as its `#position` (what the lines show) or its id. */
const ENTRY_REF = /^(#?[0-9]{1,15}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;
const entryRef = z.string().regex(ENTRY_REF).describe("#position or id");

const items = z.array(z.object({ n: z.number(), id: z.string().optional(), notice: z.string().optional() }));

const READ: ToolAnnotations = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};
const WRITE: ToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: false,
  openWorldHint: false,
};
const IDEMPOTENT: ToolAnnotations = { ...WRITE, idempotentHint: true };

function ok(text: string, structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: "text", text }], structuredContent: structured };
}

const ACCESS: Record<CubeAccess, string> = {
  [CubeAccess.UNSPECIFIED]: "",
  [CubeAccess.READ]: "read",
  [CubeAccess.WRITE]: "write",
  [CubeAccess.MANAGE]: "manage",
};

/** Rendering context for the seat: its drone and the labels of the drones the items name. */
async function viewerFor(session: McpSession, list: readonly ActivityItem[], signal: AbortSignal): Promise<Viewer> {
  const droneId = session.record.seat?.droneId;
  const base: Viewer = { droneId, labels: new Map() };
  if (unlabelled(list, base).length === 0) return base;
  const drones = await listDrones(session, undefined, signal);
  return { droneId, labels: new Map(drones.map((d) => [d.id, d.label])) };
}

async function listDrones(session: McpSession, cubeId: string | undefined, signal: AbortSignal): Promise<Drone[]> {
  const reply = await session.upstreams.cube.listDrones(
    { cubeId: session.cubeFor(cubeId), pageSize: 500 },
    await session.asFor(cubeId, signal),
  );
  return reply.drones;
}

/** The entry id a reference names: an id as is; `#n` (or `n`) looked up as the entry at that position. */
async function resolveEntry(session: McpSession, ref: string, field: string, signal: AbortSignal): Promise<string> {
  if (ref.includes("-")) return ref;
  return (await entryAt(session, ref, field, signal)).id;
}

/** The entry at position `#n`, as the drone sees it (NOT_FOUND naming `field` when it sees none there). */
async function entryAt(session: McpSession, ref: string, field: string, signal: AbortSignal): Promise<Entry> {
  const n = Number(ref.replace(/^#/, ""));
  const cubeId = session.cubeId();
  const page = await session.upstreams.activity
    .readActivity({ cubeId, cursor: cursorBefore(cubeId, n), pageSize: 1 }, await session.asActor(signal))
    .catch((error: unknown) => {
      // A position past the head (or pruned away) is an entry that is not there, said about the input.
      const code = toStatus(error).code;
      if (code === status.INVALID_ARGUMENT || code === status.FAILED_PRECONDITION) return undefined;
      throw error;
    });
  const item = page?.items[0]?.item;
  if (item?.case === "entry" && positionOf(item.value.cursor) === n) return item.value;
  throw new NotFoundError(`${field}: no entry #${n} visible to you`);
}

/** Drone ids for recipients given as ids or labels (labels resolved against the cube's drones). */
async function resolveRecipients(session: McpSession, given: readonly string[], signal: AbortSignal) {
  const isId = (value: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(value);
  if (given.every(isId)) return [...given];
  const byLabel = new Map((await listDrones(session, undefined, signal)).map((d) => [d.label, d.id]));
  return given.map((value) => {
    if (isId(value)) return value;
    const id = byLabel.get(value);
    if (!id) throw new InvalidArgumentError("recipients", `no live drone labelled ${value} (drones_list shows them)`);
    return id;
  });
}

/** The text and structured result of a list of activity items (a read, a wait). */
async function itemsResult(
  session: McpSession,
  list: ActivityItem[],
  head: string | undefined,
  tail: Record<string, unknown>,
  signal: AbortSignal,
  summarize: (rendered: ReturnType<typeof renderItems>) => string,
) {
  const rendered = renderItems(list, await viewerFor(session, list, signal));
  const lines = [summarize(rendered), ...rendered.map((r) => r.line)];
  if (head) lines.push(head);
  return ok(lines.join("\n"), { items: rendered.map((r) => r.data), ...tail });
}

/** How many decisions were recorded since the oldest of `list` (for a catch-up's summary line). */
async function decisionsSince(session: McpSession, list: readonly ActivityItem[], signal: AbortSignal) {
  const times = list.flatMap(({ item }) => (item.value?.createdAt ? [Number(item.value.createdAt.seconds)] : []));
  if (times.length === 0) return 0;
  const since = Math.min(...times);
  const reply = await session.upstreams.activity.listDecisions(
    { cubeId: session.cubeId(), pageSize: 50 },
    await session.asActor(signal),
  );
  return reply.decisions.filter((d) => Number(d.createdAt?.seconds ?? 0) >= since).length;
}

async function unreadResult(session: McpSession, page: UnreadPage, signal: AbortSignal) {
  const decisions = page.items.length > 0 ? await decisionsSince(session, page.items, signal) : 0;
  return itemsResult(session, page.items, undefined, page.hasMore ? { more: true } : {}, signal, (rendered) =>
    summaryLine(rendered, page.hasMore, { decisions }),
  );
}

/** Registers the Unimatrix tools on an MCP server bound to one session. */
export function registerTools(server: McpServer, session: McpSession): void {
  const tool = <S extends z.ZodRawShape, O extends z.ZodRawShape>(
    name: string,
    config: { title: string; description: string; annotations: ToolAnnotations; input: S; output: O },
    run: (input: z.infer<z.ZodObject<S>>, signal: AbortSignal) => Promise<CallToolResult>,
  ) => {
    server.registerTool(
      name,
      {
        title: config.title,
        description: config.description,
        inputSchema: config.input,
        outputSchema: config.output,
        annotations: config.annotations,
      },
      (async (input: z.infer<z.ZodObject<S>>, extra: { signal: AbortSignal }) =>
        session.guard(() => run(input, extra.signal), name)) as never,
    );
  };

  tool(
    "cube_list",
    {
      title: "List cubes",
      description: "The cubes you can see.",
      annotations: READ,
      input: { page_size: pageSize, page_token: pageToken },
      output: { cubes: z.array(z.object({ id: z.string() })), next: z.string().optional() },
    },
    async (input, signal) => {
      const reply = await session.upstreams.cube.listCubes(
        { pageSize: input.page_size ?? 0, pageToken: input.page_token ?? "" },
        await session.asCaller(signal),
      );
      const lines = reply.cubes.map((c) => `${c.name} (${c.id}, ${ACCESS[c.callerAccess]}): ${preview(c.directive)}`);
      if (reply.nextPageToken) lines.push(`more: page_token ${reply.nextPageToken}`);
      return ok(lines.join("\n") || "no cubes", {
        cubes: reply.cubes.map((c) => ({ id: c.id })),
        ...(reply.nextPageToken ? { next: reply.nextPageToken } : {}),
      });
    },
  );

  tool(
    "cube_get",
    {
      title: "Get a cube",
      description: "A cube's directive, kinds and roles.",
      annotations: READ,
      input: { cube_id: uuid.optional() },
      output: { roles: z.array(z.object({ id: z.string(), name: z.string() })) },
    },
    async (input, signal) => {
      const cubeId = session.cubeFor(input.cube_id);
      const [cube, roles] = await Promise.all([
        session.upstreams.cube.getCube({ cubeId }, await session.asFor(input.cube_id, signal)),
        session.upstreams.cube.listRoles({ cubeId, pageSize: 500 }, await session.asFor(input.cube_id, signal)),
      ]);
      const flags = (r: (typeof roles.roles)[number]) =>
        [
          r.isDefault && "default",
          r.roleClass === RoleClass.QUEEN && "queen",
          r.humanSeat && "human seat",
          r.canBroadcast && "broadcasts",
        ].filter(Boolean);
      const kinds = kindsOf(cube.cube?.taxonomyJson);
      const lines = [
        `${cube.cube?.name}: ${cube.cube?.directive || "(no directive)"}`,
        ...(kinds ? [`kinds: ${kinds}`] : []),
        ...roles.roles.map(
          (r) =>
            `role ${r.name} (${r.id}${flags(r).length ? `, ${flags(r).join(", ")}` : ""})${r.shortDescription ? `: ${r.shortDescription}` : ""}`,
        ),
      ];
      return ok(lines.join("\n"), { roles: roles.roles.map((r) => ({ id: r.id, name: r.name })) });
    },
  );

  tool(
    "seat_attach",
    {
      title: "Take a seat",
      description: "Take a seat (a drone) in a cube; shows the directive. Later calls act as that drone.",
      annotations: IDEMPOTENT,
      input: {
        cube_id: uuid,
        role_id: uuid.optional(),
        session_token: contractString(AttachSeatRequestSchema, "session_token")
          .optional()
          .describe("From an earlier seat_attach: resumes it"),
        prior_drone_id: uuid.optional().describe("Reattach this drone of yours"),
      },
      output: {
        outcome: z.string(),
        drone_id: z.string(),
        label: z.string(),
        role: z.string(),
        session_token: z.string().optional(),
      },
    },
    async (input, signal) => {
      const reply = await session.attach(input.cube_id, input.role_id, {
        priorDroneId: input.prior_drone_id,
        sessionToken: input.session_token,
        signal,
      });
      if (reply.outcome === AttachSeatOutcome.SESSION_REJECTED) {
        return {
          isError: true,
          content: [{ type: "text", text: SESSION_REJECTED_TEXT }],
        };
      }
      const outcome = reply.outcome === AttachSeatOutcome.REUSED ? "reused" : "created";
      const drone = reply.drone!;
      const { cube } = await session.upstreams.cube.getCube({ cubeId: input.cube_id }, await session.asActor(signal));
      const lines = [
        `Seat ${outcome}: you are ${drone.label} (role ${drone.roleName}) in ${cube?.name}.`,
        `Directive: ${cube?.directive || "(none)"}`,
        ...(reply.sessionToken ? [`session_token (keep it to resume this seat): ${reply.sessionToken}`] : []),
        "Next: log_read (what waits for you), log_wait (wait for more).",
      ];
      return ok(lines.join("\n"), {
        outcome,
        drone_id: drone.id,
        label: drone.label,
        role: drone.roleName,
        ...(reply.sessionToken ? { session_token: reply.sessionToken } : {}),
      });
    },
  );

  tool(
    "log_post",
    {
      title: "Post",
      description: "Post to the log: to all, or to recipients (labels or ids).",
      annotations: WRITE,
      input: {
        message: contractString(AppendEntryRequestSchema, "message"),
        recipients: z
          .array(z.string().min(1).max(64))
          .max(maxItems(AppendEntryRequestSchema, "recipient_drone_ids") ?? 100)
          .optional()
          .describe("Makes it direct"),
        kind: contractString(AppendEntryRequestSchema, "kind").optional().describe("From the cube's taxonomy"),
        reply_to: entryRef.optional(),
        expects_reply: z.boolean().optional().describe("false: no reply wanted"),
        ask_human: z.boolean().optional().describe("A question to the cube's humans"),
      },
      output: { n: z.number(), id: z.string() },
    },
    async (input, signal) => {
      const seat = session.requireSeat();
      // A question with no recipients goes to the cube's human seats (DIRECT without recipients).
      const direct = (input.recipients?.length ?? 0) > 0 || input.ask_human === true;
      const recipients = input.recipients?.length ? await resolveRecipients(session, input.recipients, signal) : [];
      const replyTo =
        input.reply_to !== undefined ? await resolveEntry(session, input.reply_to, "reply_to", signal) : undefined;
      const reply = await session.upstreams.activity.appendEntry(
        {
          cubeId: seat.cubeId,
          message: input.message,
          visibility: direct ? Visibility.DIRECT : Visibility.BROADCAST,
          recipientDroneIds: recipients,
          ...(input.kind !== undefined ? { kind: input.kind } : {}),
          ...(replyTo !== undefined ? { replyToEntryId: replyTo } : {}),
          ...(input.expects_reply !== undefined ? { expectsReply: input.expects_reply } : {}),
          ...(input.ask_human ? { askHuman: true } : {}),
        },
        await session.asActor(signal),
      );
      const n = positionOf(reply.entry?.cursor ?? "");
      return ok(`posted #${n}`, { n, id: reply.entry?.id ?? "" });
    },
  );

  tool(
    "log_read",
    {
      title: "Read the log",
      description: "Your unread items (≤300, summary first); cursor: the history; thread: one thread.",
      annotations: { ...WRITE, idempotentHint: false },
      input: {
        unread: z.boolean().optional(),
        cursor: z.string().max(1024).optional().describe('"" = from the start'),
        thread: entryRef.optional().describe("Read this entry's thread"),
        page_size: pageSize,
      },
      output: { items, more: z.boolean().optional(), cursor: z.string().optional() },
    },
    async (input, signal) => {
      if (input.thread !== undefined) return threadResult(session, input.thread, input.page_size, signal);
      if (input.unread ?? input.cursor === undefined) {
        return unreadResult(session, await session.readUnread(input.page_size, signal), signal);
      }
      const reply = await session.upstreams.activity.readActivity(
        { cubeId: session.cubeId(), cursor: input.cursor ?? "", pageSize: input.page_size ?? 0 },
        await session.asActor(signal),
      );
      return itemsResult(
        session,
        reply.items,
        reply.hasMore ? `more: log_read cursor ${reply.nextCursor}` : undefined,
        { cursor: reply.nextCursor, ...(reply.hasMore ? { more: true } : {}) },
        signal,
        (rendered) => `${rendered.length} item(s)`,
      );
    },
  );

  tool(
    "log_wait",
    {
      title: "Wait for activity",
      description: "Wait (default 25 s, max 50) for something new; returns it like log_read.",
      annotations: { ...WRITE, idempotentHint: false },
      input: {
        timeout_s: z.number().int().min(1).max(50).optional(),
        only: z.enum(["direct"]).optional(),
        thread: entryRef.optional().describe("Only this thread"),
      },
      output: { items, more: z.boolean().optional() },
    },
    async (input, signal) => {
      const threadRootId = input.thread !== undefined ? await threadRoot(session, input.thread, signal) : undefined;
      const page = await waitForUnread(
        session,
        (input.timeout_s ?? 25) * 1000,
        { direct: input.only === "direct", ...(threadRootId !== undefined ? { threadRootId } : {}) },
        signal,
      );
      if (!page) return ok("nothing new", { items: [] });
      return unreadResult(session, page, signal);
    },
  );

  tool(
    "log_ack",
    {
      title: "Acknowledge",
      description: "Acknowledge an entry; its author is told.",
      annotations: IDEMPOTENT,
      input: { entry_id: entryRef, quiet: z.boolean().optional().describe("Do not notify the author") },
      output: { acked: z.boolean() },
    },
    async (input, signal) => {
      const entryId = await resolveEntry(session, input.entry_id, "entry_id", signal);
      const reply = await session.upstreams.activity.ackEntry(
        { cubeId: session.cubeId(), entryId, quiet: input.quiet === true },
        await session.asActor(signal),
      );
      return ok(reply.newlyAcked ? "acked" : "already acked", { acked: reply.newlyAcked });
    },
  );

  tool(
    "log_claim",
    {
      title: "Claim an entry",
      description: "Claim an entry exclusively (a fenced lease); renew, release, or take over a stale one.",
      annotations: IDEMPOTENT,
      input: {
        entry_id: entryRef,
        action: z.enum(["claim", "renew", "release", "take_over"]).optional(),
        release: z.boolean().optional(),
        fence: z.number().int().positive().optional().describe("take_over: stale fence"),
      },
      output: { outcome: z.string(), fence: z.number().optional(), holder_drone_id: z.string().optional() },
    },
    async (input, signal) => {
      const entryId = await resolveEntry(session, input.entry_id, "entry_id", signal);
      const target = { cubeId: session.cubeId(), entryId };
      const viewer: Viewer = { droneId: session.record.seat?.droneId, labels: new Map() };
      // `release: true` is the original input (kept: an old caller must never claim by mistake).
      const action = input.action ?? (input.release ? "release" : "claim");
      const answer = (outcome: string, claim: Entry["claim"]) => {
        const other = claim?.holderDroneId && claim.holderDroneId !== viewer.droneId ? claim.holderDroneId : "";
        const live = claim && claim.state !== ClaimState.RELEASED;
        return ok(`${outcome}${claimNote(claim, viewer)}`, {
          outcome,
          ...(live && claim.fence > 0n ? { fence: Number(claim.fence) } : {}),
          ...(other ? { holder_drone_id: other } : {}),
        });
      };
      const as = await session.asActor(signal);
      if (action === "release") {
        const reply = await session.upstreams.activity.releaseClaim(target, as);
        return answer(ReleaseOutcome[reply.outcome].toLowerCase(), reply.claim);
      }
      if (action === "renew") {
        const reply = await session.upstreams.activity.renewClaim(target, as);
        return answer(RenewOutcome[reply.outcome].toLowerCase(), reply.claim);
      }
      if (action === "take_over") {
        let fence = input.fence;
        if (fence === undefined) {
          // The fence of the stale claim as it is now (the caller saw it stale in a line or notice).
          const check = await session.upstreams.activity.checkFence({ ...target, fence: 1n }, as);
          fence = Number(check.claim?.fence ?? 1n) || 1;
        }
        const reply = await session.upstreams.activity.takeOverClaim(
          { ...target, fence: BigInt(fence) },
          await session.asActor(signal),
        );
        return answer(TakeOverOutcome[reply.outcome].toLowerCase(), reply.claim);
      }
      const reply = await session.upstreams.activity.claimEntry(target, as);
      return answer(ClaimOutcome[reply.outcome].toLowerCase(), reply.claim);
    },
  );

  tool(
    "drones_list",
    {
      title: "List drones",
      description: "The cube's drones; since (#n, id or ISO time): who posted after it.",
      annotations: READ,
      input: {
        cube_id: uuid.optional(),
        since: z.string().max(64).optional(),
      },
      output: { drones: z.array(z.object({ id: z.string(), label: z.string() })) },
    },
    async (input, signal) => {
      const cubeId = session.cubeFor(input.cube_id);
      let drones: Drone[];
      if (input.since !== undefined) {
        const anchor = await sinceAnchor(session, input.since, input.cube_id, signal);
        drones = (
          await session.upstreams.cube.dronesSince({ cubeId, anchor }, await session.asFor(input.cube_id, signal))
        ).drones;
      } else {
        drones = await listDrones(session, input.cube_id, signal);
      }
      const me = session.record.seat?.droneId;
      const lines = drones.map((d) => {
        const parts = [
          d.roleName,
          d.posture === DronePosture.OBSERVER ? "observer" : "participant",
          d.live ? `seen ${shortTime(d.lastSeenAt)}` : "gone",
          ...(d.lastLogPostAt ? [`posted ${shortTime(d.lastLogPostAt)}`] : []),
          ...(input.since !== undefined ? [d.seenSince ? "posted since" : "silent since"] : []),
          ...(d.state
            ? [`${stateName(d.state)} since ${shortTime(d.stateChangedAt)}${d.stateNote ? ` (${d.stateNote})` : ""}`]
            : []),
        ];
        return `${d.label}${d.id === me ? " (you)" : ""}: ${parts.join(", ")}`;
      });
      return ok(lines.join("\n") || "no drones", { drones: drones.map((d) => ({ id: d.id, label: d.label })) });
    },
  );

  tool(
    "decision_record",
    {
      title: "Record a decision",
      description: "Record a decision, optionally on an entry.",
      annotations: WRITE,
      input: {
        title: contractString(RecordDecisionRequestSchema, "title"),
        rationale: contractString(RecordDecisionRequestSchema, "rationale").optional(),
        entry_id: entryRef.optional(),
      },
      output: { id: z.string() },
    },
    async (input, signal) => {
      const entryId =
        input.entry_id !== undefined ? await resolveEntry(session, input.entry_id, "entry_id", signal) : undefined;
      const reply = await session.upstreams.activity.recordDecision(
        {
          cubeId: session.cubeId(),
          title: input.title,
          rationale: input.rationale ?? "",
          ...(entryId !== undefined ? { entryId } : {}),
        },
        await session.asActor(signal),
      );
      return ok("recorded", { id: reply.decision?.id ?? "" });
    },
  );

  tool(
    "decision_list",
    {
      title: "List decisions",
      description: "The cube's decisions, newest first.",
      annotations: READ,
      input: { page_size: pageSize, page_token: pageToken },
      output: { decisions: z.array(z.object({ id: z.string() })), next: z.string().optional() },
    },
    async (input, signal) => {
      const reply = await session.upstreams.activity.listDecisions(
        { cubeId: session.cubeId(), pageSize: input.page_size ?? 0, pageToken: input.page_token ?? "" },
        await session.asActor(signal),
      );
      const lines = reply.decisions.map(
        (d) =>
          `${shortTime(d.createdAt)} ${d.author?.label || "someone"}: ${d.title}${d.rationale ? ` — ${preview(d.rationale, 200)}` : ""}`,
      );
      if (reply.nextPageToken) lines.push(`more: page_token ${reply.nextPageToken}`);
      return ok(lines.join("\n") || "no decisions", {
        decisions: reply.decisions.map((d) => ({ id: d.id })),
        ...(reply.nextPageToken ? { next: reply.nextPageToken } : {}),
      });
    },
  );

  tool(
    "directive_update",
    {
      title: "Update the directive",
      description: "Replace a cube's directive.",
      annotations: { ...IDEMPOTENT, destructiveHint: true },
      input: { directive: contractString(UpdateCubeRequestSchema, "directive"), cube_id: uuid.optional() },
      output: {},
    },
    async (input, signal) => {
      await session.upstreams.cube.updateCube(
        { cubeId: session.cubeFor(input.cube_id), directive: input.directive },
        await session.asFor(input.cube_id, signal),
      );
      return ok("directive updated", {});
    },
  );

  tool(
    "seat_state",
    {
      title: "Set your seat state",
      description: "Say what you are doing, with a note.",
      annotations: IDEMPOTENT,
      input: {
        state: z.enum(["working", "waiting", "blocked", "idle"]),
        note: contractString(SetSeatStateRequestSchema, "note").optional(),
      },
      output: { changed: z.boolean() },
    },
    async (input, signal) => {
      const seat = session.requireSeat();
      const state = {
        working: SeatState.WORKING,
        waiting: SeatState.WAITING,
        blocked: SeatState.BLOCKED,
        idle: SeatState.IDLE,
      }[input.state];
      const reply = await session.upstreams.cube.setSeatState(
        { cubeId: seat.cubeId, state, note: input.note ?? "" },
        await session.asActor(signal),
      );
      return ok(reply.changed ? `now ${input.state}` : "unchanged", { changed: reply.changed });
    },
  );

  tool(
    "receipts",
    {
      title: "Receipts",
      description: "Per recipient of your entry: delivered, read, acked.",
      annotations: READ,
      input: { entry_id: entryRef },
      output: {
        receipts: z.array(
          z.object({ drone_id: z.string(), delivered: z.boolean(), read: z.boolean(), acked: z.boolean() }),
        ),
      },
    },
    async (input, signal) => {
      const entryId = await resolveEntry(session, input.entry_id, "entry_id", signal);
      const reply = await session.upstreams.activity.listReceipts(
        { cubeId: session.cubeId(), entryId },
        await session.asActor(signal),
      );
      const when = (what: string, at: Parameters<typeof secondsTime>[0]) =>
        at ? `${what} ${secondsTime(at)}` : `not ${what}`;
      const lines = reply.receipts.map((r) => {
        const via = r.deliveredVia === DeliveryChannel.MACHINE_LINK ? " (machine)" : "";
        const parts = [
          when("delivered", r.deliveredAt) + (r.deliveredAt ? via : ""),
          when("read", r.readAt),
          when("acked", r.ackedAt),
        ];
        if (r.nudgedAt) parts.push(`nudged ${secondsTime(r.nudgedAt)}`);
        return `${r.label || r.droneId}: ${parts.join(", ")}`;
      });
      return ok(lines.join("\n") || "no recipients", {
        receipts: reply.receipts.map((r) => ({
          drone_id: r.droneId,
          delivered: r.deliveredAt !== undefined,
          read: r.readAt !== undefined,
          acked: r.ackedAt !== undefined,
        })),
      });
    },
  );

  tool(
    "machines_list",
    {
      title: "List machines",
      description: "Your tenant's machines, linked or not.",
      annotations: READ,
      input: { page_size: pageSize, page_token: pageToken },
      output: { machines: z.array(z.object({ id: z.string() })), next: z.string().optional() },
    },
    async (input, signal) => {
      const reply = await session.upstreams.machine.listMachines(
        { pageSize: input.page_size ?? 0, pageToken: input.page_token ?? "" },
        await session.asCaller(signal),
      );
      const lines = reply.machines.map(
        (m) => `${m.name} (${m.id}): ${m.linked ? "linked" : "unlinked"} since ${shortTime(m.presenceChangedAt)}`,
      );
      if (reply.nextPageToken) lines.push(`more: page_token ${reply.nextPageToken}`);
      return ok(lines.join("\n") || "no machines", {
        machines: reply.machines.map((m) => ({ id: m.id })),
        ...(reply.nextPageToken ? { next: reply.nextPageToken } : {}),
      });
    },
  );

  tool(
    "device_placement_get",
    {
      title: "Get a placement",
      description: "Which device a root agent session is placed on.",
      annotations: READ,
      input: { root_session_id: contractString(GetPlacementRequestSchema, "root_session_id") },
      output: { device_id: z.string().optional() },
    },
    async (input, signal) => {
      const reply = await session.upstreams.placement.getPlacement(
        { rootSessionId: input.root_session_id },
        await session.asCaller(signal),
      );
      const device = reply.placement?.deviceId;
      return ok(device ? `on device ${device}` : "not placed", device ? { device_id: device } : {});
    },
  );
}

/** The kinds a taxonomy allows, as one comma list (undefined without a taxonomy). */
function kindsOf(taxonomy: string | undefined): string | undefined {
  if (!taxonomy) return undefined;
  try {
    const parsed = JSON.parse(taxonomy) as { kinds?: unknown };
    const given = parsed.kinds;
    const kinds = Array.isArray(given) ? given : Object.keys(given && typeof given === "object" ? given : parsed);
    return kinds.map((k) => (typeof k === "string" ? k : ((k as { name?: string }).name ?? ""))).join(", ");
  } catch {
    return undefined;
  }
}

/** The DronesSince anchor a `since` input names: an entry (#n or id) or an ISO time. */
async function sinceAnchor(session: McpSession, since: string, cubeId: string | undefined, signal: AbortSignal) {
  if (/^#?[0-9]{1,15}$/.test(since) || /^[0-9a-f]{8}-[0-9a-f-]{27}$/.test(since)) {
    if (cubeId !== undefined && cubeId !== session.record.seat?.cubeId && !since.includes("-")) {
      throw new InvalidArgumentError("since", "a #position works only in your seat's cube; pass an entry id or time");
    }
    const id = await resolveEntry(session, since, "since", signal);
    return { case: "sinceEntryId" as const, value: id };
  }
  const at = new Date(since);
  if (Number.isNaN(at.getTime())) {
    throw new InvalidArgumentError("since", "must be a #position, an entry id or an ISO time");
  }
  return { case: "sinceTime" as const, value: timestampFromDate(at) };
}

const UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";

/** A JSON Schema without what costs a host tokens and tells it nothing (`$schema`, closed-object flags). */
function leanSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(leanSchema);
  if (!schema || typeof schema !== "object") return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === "$schema" || (key === "additionalProperties" && value === false)) continue;
    // Implied: a uuid is not empty; an integer is within the safe range.
    if (key === "minLength" && value === 1 && (schema as { pattern?: string }).pattern === UUID_PATTERN) continue;
    if (key === "maximum" && value === Number.MAX_SAFE_INTEGER) continue;
    // The contract's id rule (canonical lowercase UUID) is checked in full on the server; the list says uuid.
    if (key === "pattern" && value === UUID_PATTERN) out.format = "uuid";
    // An entry reference (`#41` or an id): its description says so; checked in full on the server.
    else if (key === "pattern" && value === ENTRY_REF.source) continue;
    // The contract's "no control characters" rule on text: checked on the server, not worth a line.
    else if (key === "pattern" && typeof value === "string" && value.startsWith("^[^\\x00-")) continue;
    else out[key] = leanSchema(value);
  }
  return out;
}

let leanList: unknown;

/**
 * `tools/list` kept lean (agents pay for it on every session): the SDK's list without `$schema`,
 * `additionalProperties: false` and the default `execution`, UUID patterns as `format: uuid`
 * (inputs are still checked against the full contract rule). The same for every session, so it is
 * computed once per process.
 */
export function leanToolList(server: McpServer): void {
  type Handler = (request: unknown, extra: unknown) => Promise<{ tools: Record<string, unknown>[] }>;
  const handlers = (server.server as unknown as { _requestHandlers: Map<string, Handler> })._requestHandlers;
  const original = handlers.get("tools/list");
  if (!original) return;
  handlers.set("tools/list", async (request, extra) => {
    if (leanList === undefined) {
      const { tools } = await original(request, extra);
      leanList = {
        tools: tools.map(({ execution: _execution, inputSchema, outputSchema, ...rest }) => ({
          ...rest,
          inputSchema: leanSchema(inputSchema),
          ...(outputSchema ? { outputSchema: leanSchema(outputSchema) } : {}),
        })),
      };
    }
    return leanList as { tools: Record<string, unknown>[] };
  });
}

/** The root entry id of the thread an entry (`#n` or id) belongs to. */
async function threadRoot(session: McpSession, ref: string, signal: AbortSignal): Promise<string> {
  if (!ref.includes("-")) {
    const entry = await entryAt(session, ref, "thread", signal);
    return entry.threadRootEntryId || entry.id;
  }
  const entryId = ref;
  const reply = await session.upstreams.activity.readThread(
    { cubeId: session.cubeId(), entryId, pageSize: 1 },
    await session.asActor(signal),
  );
  return reply.root?.id ?? entryId;
}

/** `log_read` with `thread`: the root and its replies, one line each (ReadThread marks them read). */
async function threadResult(session: McpSession, ref: string, pageSize: number | undefined, signal: AbortSignal) {
  const entryId = await resolveEntry(session, ref, "thread", signal);
  const reply = await session.upstreams.activity.readThread(
    { cubeId: session.cubeId(), entryId, pageSize: pageSize ?? 0 },
    await session.asActor(signal),
  );
  const entries = [...(reply.root ? [reply.root] : []), ...reply.replies];
  const list = entries.map((value) => ({ item: { case: "entry" as const, value } }) as ActivityItem);
  const viewer = await viewerFor(session, list, signal);
  const positions = new Map(entries.map((e) => [e.id, positionOf(e.cursor)]));
  const rendered = entries.map((e) => renderEntry(e, viewer, positions));
  const lines = [
    `thread of #${rendered[0]?.data.n ?? "?"}: ${reply.replies.length} repl(ies)`,
    ...rendered.map((r) => r.line),
  ];
  if (reply.nextPageToken) lines.push("more replies: log_read thread again with a larger page_size");
  return ok(lines.join("\n"), { items: rendered.map((r) => r.data), ...(reply.nextPageToken ? { more: true } : {}) });
}
