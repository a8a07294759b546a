import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import type { Acked } from "./grpc";
import type { GatewayRouter } from "./http";
import type { Ledger } from "./ledger";
import { pause, StreamRecord } from "./streams";

/** What a tool call answers. */
export interface ToolResult {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  content: { type: string; text?: string }[];
}

/** Tool errors read `CODE: message`; these codes are what a dying upstream produces. */
const SERVER_SIDE_TOOL_CODES = /^(UNAVAILABLE|INTERNAL|UNKNOWN|DEADLINE_EXCEEDED|DATA_LOSS)\b/;

/**
 * The message of a 0.1.0 push (`{event: "entry", entry: <Entry as protobuf JSON>}`): a gateway of
 * the previous release pushes that instead of the text line (the rolling-upgrade test runs both).
 */
function entryMessage(data: unknown): string | undefined {
  const push = data as { event?: string; entry?: { message?: string } } | null;
  return push?.event === "entry" && typeof push.entry?.message === "string" ? push.entry.message : undefined;
}

/**
 * One `log_post` through `via` as `surface` (`mcp`, `mcp-2026`), written to the ledger: the
 * acknowledged entry, or undefined (a tool error, or a failed exchange).
 */
export async function ledgeredPost(
  ledger: Ledger,
  surface: string,
  via: string,
  message: string,
  call: () => Promise<ToolResult>,
): Promise<Acked | undefined> {
  const startedAt = Date.now();
  const record = (outcome: string, ok: boolean, serverSide: boolean) =>
    ledger.record({ surface: `${surface} log_post`, via, startedAt, outcome, ok, serverSide });
  try {
    const result = await call();
    const text = result.content[0]?.text ?? "";
    if (result.isError) {
      record(`tool ${text}`, false, SERVER_SIDE_TOOL_CODES.test(text));
      return undefined;
    }
    record("ok", true, false);
    return { id: result.structuredContent!.id as string, message, surface, at: Date.now() };
  } catch (error) {
    record(`failed: ${(error as Error).message}`, false, true);
    return undefined;
  }
}

/**
 * An agent: the MCP SDK client over streamable HTTP through its gateway router (so after its gateway
 * dies it carries on at the other one with the same `Mcp-Session-Id`, and the SDK reopens the push
 * stream with `Last-Event-ID`). Pushed entries go into its stream record.
 */
export class McpAgent {
  readonly record: StreamRecord;
  /** Errors the SDK transport reported (stream drops, failed reconnects). */
  readonly transportErrors: { at: number; text: string }[] = [];

  private constructor(
    readonly client: Client,
    readonly transport: StreamableHTTPClientTransport,
    readonly router: GatewayRouter,
    private readonly ledger: Ledger,
    record: StreamRecord,
  ) {
    this.record = record;
  }

  /** Connects (initialize) through the router's current gateway. */
  static async open(router: GatewayRouter, token: string, ledger: Ledger, name: string): Promise<McpAgent> {
    const record = new StreamRecord(name, "mcp", "activity", "");
    const client = new Client({ name: `fleet-${name}`, version: "1.0.0" });
    // A push is the entry's text line (`#41 worker-2 → all: grpc-17`): keyed by its message (unique
    // in the fleet's load) until `Scenario.settle` maps messages to entry ids. A push read after the
    // entry was claimed or acked (the soak claims and acks) ends with its state: ` [claimed by …]`,
    // ` (2 acks)`; not part of the message.
    record.keyedBy = "message";
    const line = /^#\d+ \S+ → [^:]+: (.*?)(?: \[(?:claimed by|stale claim of) [^\]]*\])?(?: \(\d+ acks?\))?$/;
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
      const data = notification.params.data;
      const message = typeof data === "string" ? line.exec(data)?.[1] : entryMessage(data);
      if (message !== undefined) record.deliver(message, "");
    });
    const transport = new StreamableHTTPClientTransport(new URL(`${router.current}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
      fetch: (url, init) => {
        if ((init?.method ?? "GET") === "GET") record.opens += 1;
        return router.fetch(url, init);
      },
      reconnectionOptions: {
        initialReconnectionDelay: 200,
        maxReconnectionDelay: 2_000,
        reconnectionDelayGrowFactor: 1.5,
        maxRetries: 30,
      },
    });
    const agent = new McpAgent(client, transport, router, ledger, record);
    client.onerror = (error) => {
      agent.transportErrors.push({ at: Date.now(), text: error.message });
      record.breaks.push({ at: Date.now(), reason: error.message });
    };
    await client.connect(transport);
    return agent;
  }

  /** The MCP session id the gateway gave. */
  get sessionId(): string | undefined {
    return this.transport.sessionId;
  }

  /** Calls a tool (throws when the HTTP exchange fails). */
  async tool(name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
    // A request lost with its gateway is not answered elsewhere: give up on it after 15 s, as an agent would.
    return (await this.client.callTool({ name, arguments: args }, undefined, { timeout: 15_000 })) as ToolResult;
  }

  /** Takes a seat in the cube; the gateway then pushes the drone's activity to this session. */
  async attach(cubeId: string, roleId: string): Promise<string> {
    const result = await this.tool("seat_attach", { cube_id: cubeId, role_id: roleId });
    if (result.isError) throw new Error(`seat_attach failed: ${result.content[0]?.text}`);
    const droneId = result.structuredContent!.drone_id as string;
    // The gateway does not push a drone's own posts back to it.
    this.record.ownDroneId = droneId;
    return droneId;
  }

  /** Posts one broadcast with `log_post`; the acknowledged entry, or undefined (written to the ledger). */
  post(message: string): Promise<Acked | undefined> {
    return ledgeredPost(this.ledger, "mcp", this.router.current, message, () => this.tool("log_post", { message }));
  }

  /** Posts every `everyMs` until aborted. */
  postLoop(acked: Acked[], signal: AbortSignal, everyMs: number): Promise<void> {
    return (async () => {
      for (let n = 1; !signal.aborted; n++) {
        const entry = await this.post(`${this.record.name}-${n}`);
        if (entry) acked.push(entry);
        await pause(everyMs, signal);
      }
    })();
  }

  async close(): Promise<void> {
    await this.client.close().catch(() => {});
  }
}
