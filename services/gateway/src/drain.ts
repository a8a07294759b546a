import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * The gateway's drain, as cube's and presence's (`UMX_DRAIN_DELAY_MS`): on SIGTERM `/readyz`
 * answers 503 at once so the load balancer stops sending new connections, and for the delay the
 * gateway keeps serving — every response, including those already in flight, closes its
 * connection, so a client's next request opens a connection elsewhere instead of being written on
 * a keep-alive connection the gateway is about to close. At the end of the delay the long GET
 * streams (SSE, the MCP 2025-11-25 push) end cleanly; their clients resume elsewhere from their
 * cursor (`Last-Event-ID`). What is still open then gets the shutdown grace, as before.
 */
export class Drain {
  #draining = false;
  readonly #open = new Set<{ readonly request: IncomingMessage; readonly response: ServerResponse }>();

  /** True from the start of the drain. */
  get draining(): boolean {
    return this.#draining;
  }

  /** Follows a request until its response closes; during the drain its connection closes after it. */
  track(request: IncomingMessage, response: ServerResponse): void {
    const held = { request, response };
    this.#open.add(held);
    response.once("close", () => this.#open.delete(held));
    if (this.#draining) response.setHeader("connection", "close");
  }

  /** Drains for `ms`, then ends the open GET event streams; resolves when they were ended. */
  async run(ms: number): Promise<void> {
    this.#draining = true;
    for (const { response } of this.#open) if (!response.headersSent) response.setHeader("connection", "close");
    await new Promise((resolve) => setTimeout(resolve, ms));
    for (const { request, response } of this.#open) {
      const type = String(response.getHeader("content-type") ?? "");
      if (request.method !== "GET" || !type.startsWith("text/event-stream") || response.writableEnded) continue;
      // The stream's writer learns of the end from the response's close; a write in between is dropped.
      response.on("error", () => {});
      response.end();
    }
  }
}
