import { status } from "@grpc/grpc-js";
import type { CallToolResult, LoggingLevel } from "@modelcontextprotocol/sdk/types.js";
import { AttachSeatOutcome, type AttachSeatResponse } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { DomainError, InvalidArgumentError, isServiceError, type Logger } from "@unimatrix/service-kit";
import type { EdgeAuthenticator, EdgeCaller } from "../auth";
import { upstreamMetadata } from "../forward";
import type { Upstreams } from "../upstreams";
import type { McpSessionStore, SessionRecord } from "./session-store";

/** What a session needs from the gateway. */
export interface McpSessionDeps {
  readonly upstreams: Upstreams;
  readonly auth: EdgeAuthenticator;
  readonly sessions: McpSessionStore;
  readonly internalKey: string;
  readonly logger: Logger;
  readonly timeoutMs: number;
}

/**
 * One MCP session as one request sees it: the bearer of this request (its digest is the
 * session's credential key) and, after `seat_attach`, the drone it acts as. The state lives in
 * the fleet's session store, so any replica builds this for any request; no tool input can name
 * the drone.
 */
export class McpSession {
  readonly upstreams: Upstreams;
  #record: SessionRecord;

  constructor(
    private readonly deps: McpSessionDeps,
    /** The session id (`Mcp-Session-Id`). */
    readonly id: string,
    record: SessionRecord,
    /** The `Authorization` header of the request being served. */
    private readonly authorization: string,
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

  /** As the drone for the seat's own cube; as the bearer for another cube the tool names. */
  asFor(cubeId: string | undefined, signal?: AbortSignal) {
    return cubeId === undefined || cubeId === this.#record.seat?.cubeId ? this.asActor(signal) : this.asCaller(signal);
  }

  /** The cube a call is about: the one given, else the seat's. */
  cubeId(given?: string): string {
    const cubeId = given ?? this.#record.seat?.cubeId;
    if (!cubeId) throw new InvalidArgumentError("cube_id", "required until you attach a seat with seat_attach");
    return cubeId;
  }

  /**
   * Attaches (or re-attaches) a seat as the bearer. The seat and the cube's head at that moment go
   * to the session store, so the push stream — on whichever replica holds it — starts there.
   */
  async attach(
    cubeId: string,
    roleId: string,
    given: {
      priorDroneId?: string | undefined;
      sessionToken?: string | undefined;
      hostname?: string | undefined;
      signal?: AbortSignal;
    },
  ): Promise<AttachSeatResponse> {
    const current = this.#record.seat;
    const held = current && current.cubeId === cubeId && current.roleId === roleId ? current.token : undefined;
    const saved = given.sessionToken ?? held;
    const reply = await this.upstreams.cube.attachSeat(
      {
        cubeId,
        roleId,
        hostname: given.hostname ?? "mcp",
        ...(saved ? { sessionToken: saved } : {}),
        ...(given.priorDroneId !== undefined ? { priorDroneId: given.priorDroneId } : {}),
      },
      await this.asCaller(given.signal),
    );
    if (reply.outcome === AttachSeatOutcome.SESSION_REJECTED || !reply.drone) return reply;
    const token = reply.outcome === AttachSeatOutcome.REUSED && saved ? saved : reply.sessionToken;
    const seat = { cubeId, roleId, droneId: reply.drone.id, token };
    const same = current?.cubeId === cubeId && current.droneId === seat.droneId;
    const cursor = same ? this.#record.cursor : await this.#head(seat, given.signal);
    this.#record = (await this.deps.sessions.update(this.id, { seat, cursor })) ?? this.#record;
    return reply;
  }

  /** Runs a tool, turning failures into MCP tool errors with a readable message. */
  async guard(run: () => Promise<CallToolResult>): Promise<CallToolResult> {
    try {
      return await run();
    } catch (error) {
      const text = describe(error);
      if (text === undefined) this.deps.logger.error({ err: error }, "mcp tool failed");
      return { isError: true, content: [{ type: "text", text: text ?? "INTERNAL: internal error" }] };
    }
  }

  /** Sets the level below which push notifications are not sent (fleet-wide). */
  async setLogLevel(level: LoggingLevel): Promise<void> {
    this.#record = (await this.deps.sessions.update(this.id, { logLevel: level })) ?? this.#record;
  }

  #options(principal: EdgeCaller["principal"], signal?: AbortSignal) {
    const metadata = upstreamMetadata(this.deps.internalKey, principal);
    return { metadata, deadline: this.deps.timeoutMs, ...(signal ? { signal } : {}) };
  }

  /** The drone's current position in the cube (the `ready` cursor of a subscription from the head). */
  async #head(seat: { cubeId: string; token: string }, signal?: AbortSignal): Promise<string | undefined> {
    const controller = new AbortController();
    signal?.addEventListener("abort", () => controller.abort(), { once: true });
    const { principal } = await this.deps.auth.authenticate(`Bearer ${seat.token}`);
    const options = { ...this.#options(principal), deadline: this.deps.timeoutMs, signal: controller.signal };
    try {
      for await (const { event } of this.upstreams.activity.subscribeActivity({ cubeId: seat.cubeId }, options)) {
        if (event.case === "ready") return event.value.cursor;
      }
      return undefined;
    } catch (error) {
      if (controller.signal.aborted) return undefined;
      // The push starts at the head then; nothing is lost for log_read (the inbox is in the database).
      this.deps.logger.warn({ err: error }, "mcp seat head lookup failed");
      return undefined;
    } finally {
      controller.abort();
    }
  }
}

/** `CODE: message` for a caller-visible error; undefined for an unexpected one. */
function describe(error: unknown): string | undefined {
  if (error instanceof DomainError) return `${status[error.code]}: ${error.message}`;
  if (isServiceError(error)) return `${status[error.code]}: ${error.details}`;
  return undefined;
}
