import { status } from "@grpc/grpc-js";
import type { CallToolResult, LoggingLevel } from "@modelcontextprotocol/sdk/types.js";
import { AttachSeatOutcome, type AttachSeatResponse } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import type { ActivityItem, Decision } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { FailedPreconditionError, InvalidArgumentError } from "@unimatrix/service-kit/errors";
import type { Logger } from "@unimatrix/service-kit/logger";
import type { EdgeAuthenticator, EdgeCaller } from "../auth";
import { upstreamMetadata } from "../forward";
import { answerOf } from "../status-table";
import type { Upstreams } from "../upstreams";
import { isOwn } from "./format";
import type { McpSessionStore, SeatRecord, SessionRecord } from "./session-store";

/** One read of the drone's inbox, without its own entries. */
export interface UnreadPage {
  readonly items: ActivityItem[];
  /** The new inbox position. */
  readonly cursor: string;
  readonly hasMore: boolean;
  /**
   * The cube's latest decisions (newest first), when they were read beside the page because it
   * was about to be rendered (a woken wait); a summary line counts those since its oldest item.
   */
  readonly decisions?: readonly Decision[];
}

/** How many unread items one read returns by default ("an ordinary absence" in one call). */
const UNREAD_PAGE = 300;

/** How many of the cube's latest decisions a catch-up's summary line looks at. */
const LATEST_DECISIONS = 50;

/** What a session needs from the gateway. */
export interface McpSessionDeps {
  readonly upstreams: Upstreams;
  readonly auth: EdgeAuthenticator;
  readonly sessions: McpSessionStore;
  readonly internalKey: string;
  readonly logger: Logger;
  readonly timeoutMs: number;
  /** Counts a finished tool call: `outcome` is `ok` or the lower-case gRPC code it failed with. */
  readonly onToolCall?: (tool: string, outcome: string) => void;
  /** Counts what a `log_wait` saw: it started listening, an item passed it by, it was woken. */
  readonly onWaitEvent?: (event: WaitEvent) => void;
}

/** What a `log_wait` reports while it waits (a metric, and what tests wait on to prove it kept waiting). */
export type WaitEvent = "listening" | "passed" | "woken";

/** Keeps a change to the session's state: in the fleet's session store (2025-11-25), or nowhere (2026-07-28). */
export type SaveSession = (patch: Partial<Omit<SessionRecord, "credentialKey">>) => Promise<SessionRecord | undefined>;

/**
 * What tools act through for one request: the bearer of this request (its digest is the
 * credential key) and, once a seat is named, the drone it acts as. On 2025-11-25 the state is an
 * MCP session in the fleet's session store (any replica builds this for any request); on
 * 2026-07-28 there is no session: the seat is the drone session token the agent holds (see
 * `modern.ts`) and nothing outlives the request.
 */
export class McpSession {
  readonly upstreams: Upstreams;
  #record: SessionRecord;

  constructor(
    readonly deps: McpSessionDeps,
    record: SessionRecord,
    /** The `Authorization` header of the request being served. */
    private readonly authorization: string,
    readonly save: SaveSession,
  ) {
    this.upstreams = deps.upstreams;
    this.#record = record;
  }

  /** The session's state as last read or written. */
  get record(): SessionRecord {
    return this.#record;
  }

  /** Call options acting as the bearer (re-checked through the auth cache, so revocation bites). */
  async asCaller(signal?: AbortSignal) {
    const { principal } = await this.deps.auth.authenticate(this.authorization);
    return this.#options(principal, signal);
  }

  /** Call options acting as the attached drone, or as the bearer before any seat is taken. */
  async asActor(signal?: AbortSignal) {
    const seat = this.#record.seat;
    if (!seat) return this.asCaller(signal);
    const { principal } = await this.deps.auth.authenticate(`Bearer ${seat.token}`);
    return this.#options(principal, signal);
  }

  /** Call options acting as the drone, for a stream that may stay open `ms` (a wait). */
  async asActorFor(ms: number, signal?: AbortSignal) {
    const options = await this.asActor(signal);
    return { ...options, deadline: ms };
  }

  /**
   * Acts as the drone whose session token `token` is (2026-07-28's `seat` input) for the rest of
   * this request: the token is checked like any credential (a revoked one answers UNAUTHENTICATED).
   */
  async useSeat(token: string): Promise<void> {
    const found = await seatOf(this.deps.auth, token);
    if (!found) throw new InvalidArgumentError("seat", "is not a session_token from seat_attach");
    this.#record = { ...this.#record, seat: found.seat };
  }

  /** The seat, or FAILED_PRECONDITION saying to attach one (a tool without a `cube_id` input). */
  requireSeat(): SeatRecord {
    const seat = this.#record.seat;
    if (!seat) throw new FailedPreconditionError("no seat yet: call seat_attach first");
    return seat;
  }

  /**
   * Reads the drone's inbox (`ReadUnread`, which advances it) without the drone's own entries,
   * reading on while a page held only those; remembers the new position in the session (where a
   * filtered `log_wait` starts, on any replica).
   */
  async readUnread(pageSize: number | undefined, signal?: AbortSignal): Promise<UnreadPage> {
    const seat = this.requireSeat();
    const want = pageSize ?? UNREAD_PAGE;
    const items: ActivityItem[] = [];
    let cursor = "";
    let hasMore = false;
    for (let round = 0; round < 10; round++) {
      const reply = await this.upstreams.activity.readUnread(
        { cubeId: seat.cubeId, pageSize: Math.min(500, want - items.length) },
        await this.asActor(signal),
      );
      items.push(...reply.items.filter((item) => !isOwn(item, seat.droneId)));
      cursor = reply.cursor;
      hasMore = reply.hasMore;
      if (!hasMore || items.length >= want) break;
    }
    if (cursor && cursor !== this.#record.inbox) {
      this.#record = (await this.save({ inbox: cursor })) ?? this.#record;
    }
    return { items, cursor, hasMore };
  }

  /**
   * `readUnread` for a page about to be rendered, with the cube's latest decisions read at the same
   * time instead of after it (a woken wait: one round trip less between the wake and its answer).
   */
  async readUnreadToRender(signal?: AbortSignal): Promise<UnreadPage> {
    const [page, decisions] = await Promise.all([this.readUnread(undefined, signal), this.latestDecisions(signal)]);
    return { ...page, decisions };
  }

  /** The seat's cube's latest decisions, newest first. */
  async latestDecisions(signal?: AbortSignal): Promise<Decision[]> {
    const reply = await this.upstreams.activity.listDecisions(
      { cubeId: this.cubeId(), pageSize: LATEST_DECISIONS },
      await this.asActor(signal),
    );
    return reply.decisions;
  }

  /**
   * A look at the drone's inbox without taking anything (`ReadUnread` with `peek`): the items past
   * the inbox position, without the drone's own, and the cursor the look ended at.
   */
  async peekUnread(signal?: AbortSignal): Promise<UnreadPage> {
    const seat = this.requireSeat();
    const reply = await this.upstreams.activity.readUnread(
      { cubeId: seat.cubeId, pageSize: 500, peek: true },
      await this.asActor(signal),
    );
    const items = reply.items.filter((item) => !isOwn(item, seat.droneId));
    return { items, cursor: reply.cursor, hasMore: reply.hasMore };
  }

  /** As the drone for the seat's own cube; as the bearer for another cube the tool names. */
  asFor(cubeId: string | undefined, signal?: AbortSignal) {
    return cubeId === undefined || cubeId === this.#record.seat?.cubeId ? this.asActor(signal) : this.asCaller(signal);
  }

  /** The cube of a tool with a `cube_id` input: the one given, else the seat's (else `cube_id` is required). */
  cubeFor(given: string | undefined): string {
    const cubeId = given ?? this.#record.seat?.cubeId;
    if (!cubeId) throw new InvalidArgumentError("cube_id", "required until you attach a seat with seat_attach");
    return cubeId;
  }

  /** The seat's cube, for a tool without a `cube_id` input (FAILED_PRECONDITION before seat_attach). */
  cubeId(): string {
    return this.requireSeat().cubeId;
  }

  /**
   * Attaches (or re-attaches) a seat as the bearer. The seat and the cube's head at that moment go
   * to the session store, so the push stream — on whichever replica holds it — starts there.
   */
  async attach(
    cubeId: string,
    roleId: string | undefined,
    given: {
      priorDroneId?: string | undefined;
      sessionToken?: string | undefined;
      hostname?: string | undefined;
      signal?: AbortSignal;
    },
  ): Promise<AttachSeatResponse> {
    const current = this.#record.seat;
    const held =
      current && current.cubeId === cubeId && (roleId === undefined || current.roleId === roleId)
        ? current.token
        : undefined;
    const saved = given.sessionToken ?? held;
    const reply = await this.upstreams.cube.attachSeat(
      {
        cubeId,
        roleId: roleId ?? "",
        hostname: given.hostname ?? "mcp",
        ...(saved ? { sessionToken: saved } : {}),
        ...(given.priorDroneId !== undefined ? { priorDroneId: given.priorDroneId } : {}),
      },
      await this.asCaller(given.signal),
    );
    if (reply.outcome === AttachSeatOutcome.SESSION_REJECTED || !reply.drone) return reply;
    const token = reply.outcome === AttachSeatOutcome.REUSED && saved ? saved : reply.sessionToken;
    const seat = { cubeId, roleId: reply.drone.roleId, droneId: reply.drone.id, token };
    const same = current?.cubeId === cubeId && current.droneId === seat.droneId;
    const cursor = same ? this.#record.cursor : reply.headCursor || undefined;
    const inbox = same ? this.#record.inbox : undefined;
    this.#record = (await this.save({ seat, cursor, inbox })) ?? this.#record;
    return reply;
  }

  /** Runs a tool, turning failures into MCP tool errors with a readable message; counts its outcome. */
  async guard(run: () => Promise<CallToolResult>, tool?: string): Promise<CallToolResult> {
    let result: CallToolResult;
    try {
      result = await run();
    } catch (error) {
      result = { isError: true, content: [{ type: "text", text: describe(error, this.deps.logger, tool) }] };
    }
    if (tool) this.deps.onToolCall?.(tool, outcomeOf(result));
    return result;
  }

  /** Sets the level below which push notifications are not sent (fleet-wide). */
  async setLogLevel(level: LoggingLevel): Promise<void> {
    this.#record = (await this.save({ logLevel: level })) ?? this.#record;
  }

  #options(principal: EdgeCaller["principal"], signal?: AbortSignal) {
    const metadata = upstreamMetadata(this.deps.internalKey, principal);
    return { metadata, deadline: this.deps.timeoutMs, ...(signal ? { signal } : {}) };
  }
}

/**
 * The seat a drone session token is, with the principal it resolved to (checked like any credential:
 * a revoked one throws UNAUTHENTICATED); undefined for a token of any other kind.
 */
export async function seatOf(
  auth: EdgeAuthenticator,
  token: string,
): Promise<{ seat: SeatRecord; principal: EdgeCaller["principal"] } | undefined> {
  const { principal } = await auth.authenticate(`Bearer ${token}`);
  if (principal.kind !== "drone-session") return undefined;
  return { seat: { cubeId: principal.cubeId, roleId: "", droneId: principal.droneId, token }, principal };
}

/** Contract field names a service error may name, as the tool inputs that carry them. */
const INPUT_NAMES: Record<string, string> = {
  recipient_drone_ids: "recipients",
  recipient_labels: "recipients",
  reply_to_entry_id: "reply_to",
  reply_to_position: "reply_to",
  entry_position: "entry_id",
  since_position: "since",
  since_entry_id: "since",
  since_time: "since",
  page_token: "page_token",
};

/** An error message with a leading contract field name (`field: reason`) renamed to the tool input. */
function asInputs(message: string): string {
  return message.replace(/^([a-z_]+)(?=[:.[ ])/, (field) => INPUT_NAMES[field] ?? field);
}

/** What an agent reads when its session's credential or seat stopped authenticating. */
const REVOKED_TEXT =
  "UNAUTHENTICATED: this session's credential or seat was revoked, rotated or expired; start a new session with a valid token";

/** `CODE: message` (the status table's gRPC name) for any error; an unexpected one is `INTERNAL: internal error`, logged. */
function describe(error: unknown, logger: Logger, tool = "tool"): string {
  const { code, message, row } = answerOf(error, logger, `mcp ${tool}`);
  if (code === status.UNAUTHENTICATED) return REVOKED_TEXT;
  return `${row.grpcName}: ${asInputs(message)}`;
}

const CODE_NAMES = new Set(Object.keys(status).filter((name) => Number.isNaN(Number(name))));

/** `ok`, or the lower-case gRPC code an error result names (`error` when it names none): a bounded label. */
function outcomeOf(result: CallToolResult): string {
  if (!result.isError) return "ok";
  const first = result.content[0];
  const code = first?.type === "text" ? /^([A-Z_]+):/.exec(first.text)?.[1] : undefined;
  return code && CODE_NAMES.has(code) ? code.toLowerCase() : "error";
}
