import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { Acked } from "./grpc";
import type { GatewayRouter } from "./http";
import type { Ledger } from "./ledger";
import { ledgeredPost, type ToolResult } from "./mcp";
import { pause, StreamRecord } from "./streams";

/** A stock SDK v2 client pinned to revision 2026-07-28 (no initialize, no session), through `router`. */
async function statelessClient(router: GatewayRouter, token: string, name: string): Promise<Client> {
  const client = new Client({ name, version: "1.0.0" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${router.current}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
      fetch: router.fetch,
    }),
  );
  return client;
}

/**
 * An agent on MCP 2026-07-28: it attaches through one gateway, posts through another naming its seat
 * (`seat`), and listens to `unimatrix://inbox` through the first; when that listen ends (its
 * gateway died) it listens again, through whichever gateway its router reaches, after the last
 * cursor it heard. Its record is keyed by cube cursors (a delivery carries its line and cursor, not
 * the entry id); `Scenario.settle` maps them to entry ids for the comparison with the log.
 */
export class StatelessAgent {
  readonly record: StreamRecord;
  #seat = "";

  private constructor(
    private readonly listener: Client,
    private readonly poster: Client,
    readonly router: GatewayRouter,
    private readonly postRouter: GatewayRouter,
    private readonly ledger: Ledger,
    record: StreamRecord,
  ) {
    this.record = record;
  }

  /** Connects a listening client through `router` and a posting one through `postRouter`. */
  static async open(
    router: GatewayRouter,
    postRouter: GatewayRouter,
    token: string,
    ledger: Ledger,
    name: string,
    start: string,
  ): Promise<StatelessAgent> {
    const record = new StreamRecord(name, "mcp", "activity", start);
    record.keyedBy = "cursor";
    const listener = await statelessClient(router, token, `fleet-${name}`);
    const poster = await statelessClient(postRouter, token, `fleet-${name}-poster`);
    listener.setNotificationHandler("notifications/resources/updated", (note) => {
      const meta = (note.params._meta ?? {}) as { line?: string; cursor?: string };
      // Entries only (a notification's line starts `#n <kind> by`): the log the comparison reads.
      if (meta.cursor && meta.line && / → /.test(meta.line)) record.deliver(meta.cursor, meta.cursor);
    });
    return new StatelessAgent(listener, poster, router, postRouter, ledger, record);
  }

  /** Takes a seat through the listening gateway; later calls name it. */
  async attach(cubeId: string, roleId: string): Promise<void> {
    const result = (await this.listener.callTool({
      name: "seat_attach",
      arguments: { cube_id: cubeId, role_id: roleId },
    })) as ToolResult;
    if (result.isError) throw new Error(`seat_attach failed: ${result.content[0]?.text}`);
    this.#seat = result.structuredContent!.session_token as string;
    this.record.ownDroneId = result.structuredContent!.drone_id as string;
  }

  /** Listens until `signal`, listening again after the last cursor whenever a listen ends. */
  listenLoop(signal: AbortSignal): Promise<void> {
    return (async () => {
      while (!signal.aborted) {
        const after = this.record.cursor ? `&after=${encodeURIComponent(this.record.cursor)}` : "";
        const uri = `unimatrix://inbox?seat=${encodeURIComponent(this.#seat)}${after}`;
        try {
          this.record.opens += 1;
          const subscription = await this.listener.listen({ resourceSubscriptions: [uri] }, { timeout: 10_000 });
          this.record.readyCount += 1;
          const stop = () => void subscription.close();
          signal.addEventListener("abort", stop, { once: true });
          const how = await subscription.closed;
          signal.removeEventListener("abort", stop);
          if (how !== "local") this.record.breaks.push({ at: Date.now(), reason: `listen ended (${how})` });
        } catch (error) {
          this.record.breaks.push({ at: Date.now(), reason: (error as Error).message });
          await pause(200, signal);
        }
      }
    })();
  }

  /** Posts one broadcast through the posting gateway, naming the seat; the acknowledged entry, or undefined. */
  post(message: string): Promise<Acked | undefined> {
    return ledgeredPost(
      this.ledger,
      "mcp-2026",
      this.postRouter.current,
      message,
      async () =>
        (await this.poster.callTool(
          { name: "log_post", arguments: { message, seat: this.#seat } },
          { timeout: 15_000 },
        )) as ToolResult,
    );
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
    await Promise.allSettled([this.listener.close(), this.poster.close()]);
  }
}
