import { toJson } from "@bufbuild/protobuf";
import { status } from "@grpc/grpc-js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { AttachSeatOutcome, type AttachSeatResponse } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { EntrySchema, NotificationSchema } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { DomainError, InvalidArgumentError, isServiceError, type Logger } from "@unimatrix/service-kit";
import type { EdgeAuthenticator, EdgeCaller } from "../auth";
import { upstreamMetadata } from "../forward";
import type { Upstreams } from "../upstreams";

/** What a session needs from the gateway. */
export interface McpSessionDeps {
  readonly upstreams: Upstreams;
  readonly auth: EdgeAuthenticator;
  readonly internalKey: string;
  readonly logger: Logger;
  readonly timeoutMs: number;
}

interface Seat {
  readonly cubeId: string;
  readonly roleId: string;
  readonly droneId: string;
  readonly token: string;
}

/**
 * One MCP session: the bearer who opened it, and, after `seat_attach`, the drone it acts as.
 * The drone identity lives here and only here; no tool input can name it.
 */
export class McpSession {
  readonly upstreams: Upstreams;
  #seat: Seat | undefined;
  #subscription: AbortController | undefined;
  #server: McpServer | undefined;

  constructor(
    private readonly deps: McpSessionDeps,
    /** The `Authorization` header value that opened the session. */
    private readonly authorization: string,
    /** The caller that opened it (its credential key guards the session against other tokens). */
    readonly caller: EdgeCaller,
  ) {
    this.upstreams = deps.upstreams;
  }

  /** Binds the MCP server that pushes notifications for this session. */
  bind(server: McpServer): void {
    this.#server = server;
  }

  /** Call options acting as the bearer (re-checked through the auth cache, so revocation bites). */
  async asCaller(signal?: AbortSignal) {
    this.touch();
    const { principal } = await this.deps.auth.authenticate(this.authorization);
    return this.#options(principal, signal);
  }

  /** Call options acting as the attached drone, or as the bearer before any seat is taken. */
  async asActor(signal?: AbortSignal) {
    if (!this.#seat) return this.asCaller(signal);
    this.touch();
    const { principal } = await this.deps.auth.authenticate(`Bearer ${this.#seat.token}`);
    return this.#options(principal, signal);
  }

  /** As the drone for the seat's own cube; as the bearer for another cube the tool names. */
  asFor(cubeId: string | undefined, signal?: AbortSignal) {
    return cubeId === undefined || cubeId === this.#seat?.cubeId ? this.asActor(signal) : this.asCaller(signal);
  }

  /** When the session was last used (epoch ms): idle sessions are closed by the handler. */
  lastUsed = Date.now();

  /** Marks the session as used now. */
  touch(): void {
    this.lastUsed = Date.now();
  }

  /** The cube a call is about: the one given, else the seat's. */
  cubeId(given?: string): string {
    const cubeId = given ?? this.#seat?.cubeId;
    if (!cubeId) throw new InvalidArgumentError("cube_id", "required until you attach a seat with seat_attach");
    return cubeId;
  }

  /** Attaches (or re-attaches) a seat as the bearer and starts pushing the drone's activity. */
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
    const held =
      this.#seat && this.#seat.cubeId === cubeId && this.#seat.roleId === roleId ? this.#seat.token : undefined;
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
    this.#seat = { cubeId, roleId, droneId: reply.drone.id, token };
    this.#follow();
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

  /** Ends the session's push stream. */
  close(): void {
    this.#subscription?.abort();
    this.#subscription = undefined;
  }

  #options(principal: EdgeCaller["principal"], signal?: AbortSignal) {
    const metadata = upstreamMetadata(this.deps.internalKey, principal);
    return { metadata, deadline: this.deps.timeoutMs, ...(signal ? { signal } : {}) };
  }

  /**
   * Follows the drone's activity and pushes each entry and notification (acks, claims, releases,
   * heartbeat pings) to the client as an MCP logging notification. Reconnects from the last cursor.
   */
  #follow(): void {
    this.#subscription?.abort();
    const controller = new AbortController();
    this.#subscription = controller;
    const seat = this.#seat!;
    let after: string | undefined;
    let backoffMs = 250;
    const run = async () => {
      while (!controller.signal.aborted) {
        try {
          const options = { ...(await this.asActor()), deadline: undefined, signal: controller.signal };
          const stream = this.upstreams.activity.subscribeActivity(
            { cubeId: seat.cubeId, ...(after !== undefined ? { after } : {}) },
            options,
          );
          for await (const message of stream) {
            const { event } = message;
            backoffMs = 250;
            if (event.case === "entry" || event.case === "notification") {
              after = event.value.cursor;
              const data =
                event.case === "entry"
                  ? { event: "entry", entry: toJson(EntrySchema, event.value) }
                  : { event: "notification", notification: toJson(NotificationSchema, event.value) };
              await this.#server?.sendLoggingMessage({ level: "info", logger: "unimatrix.activity", data });
            } else if (event.case === "ready" && after === undefined) {
              // "" means "from the oldest" (an empty cube): keep it so a reconnect misses nothing.
              after = event.value.cursor;
            } else if (event.case === "accessRevoked") {
              // Tell the client why pushing stops (rotation, eviction, revocation) instead of going quiet.
              const data = { event: "access_revoked", reason: event.value.reason };
              await this.#server?.sendLoggingMessage({ level: "warning", logger: "unimatrix.activity", data });
              return;
            } else if (event.case === "closed") {
              if (event.value.cursor) after = event.value.cursor;
              break;
            }
          }
        } catch (error) {
          if (controller.signal.aborted) return;
          const code = isServiceError(error) || error instanceof DomainError ? error.code : undefined;
          if (code === status.UNAUTHENTICATED || code === status.NOT_FOUND || code === status.PERMISSION_DENIED) return;
          if (code === status.RESOURCE_EXHAUSTED) {
            // Too many streams for this seat's credential: pushing stops; log_read is the pull path.
            this.deps.logger.warn("mcp activity push stopped: stream limit reached for this seat");
            return;
          }
          this.deps.logger.warn({ err: error }, "mcp activity stream dropped; resuming");
        }
        await new Promise((resolve) => setTimeout(resolve, backoffMs));
        backoffMs = Math.min(backoffMs * 2, 10_000);
      }
    };
    run().catch((error: unknown) => this.deps.logger.error({ err: error }, "mcp activity stream failed"));
  }
}

/** `CODE: message` for a caller-visible error; undefined for an unexpected one. */
function describe(error: unknown): string | undefined {
  if (error instanceof DomainError) return `${status[error.code]}: ${error.message}`;
  if (isServiceError(error)) return `${status[error.code]}: ${error.details}`;
  return undefined;
}
