import type { IncomingMessage, ServerResponse } from "node:http";
import type { AuthInfo } from "@modelcontextprotocol/server";

/** The SDK's web-standard entry (`createMcpHandler`): a request, and the body the door already parsed. */
interface WebEntry {
  fetch(request: Request, options?: { parsedBody?: unknown; authInfo?: AuthInfo }): Promise<Response>;
}

/** Request headers that describe a body on the wire; the web request carries none (the entry takes it parsed). */
const BODY_HEADERS = new Set(["content-length", "content-encoding", "transfer-encoding"]);

/** The web request the entry reads: method, URL, headers and an abort signal, no body. */
function webRequest(request: IncomingMessage, signal: AbortSignal): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || name.startsWith(":") || BODY_HEADERS.has(name)) continue;
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else headers.set(name, value);
  }
  const url = `http://${request.headers.host ?? "localhost"}${request.url ?? "/"}`;
  return new Request(url, { method: request.method ?? "GET", headers, signal });
}

/**
 * Serves the SDK's 2026-07-28 entry on Node's request and response, for a body `/mcp` already read
 * and parsed. In place of `@modelcontextprotocol/node`'s `toNodeHandler`, which serialises the
 * parsed body again into the web request and copies every answer through a web stream in chunked
 * writes: here the web request has no body, a JSON answer is written at once with its length, and
 * only an event stream is piped (honouring backpressure). The client going away aborts the
 * request's signal, as there.
 */
export function nodeEntry(entry: WebEntry, onError: (error: unknown) => void) {
  return async (
    request: IncomingMessage,
    response: ServerResponse,
    parsedBody: unknown,
    authInfo: AuthInfo,
  ): Promise<void> => {
    const abort = new AbortController();
    let finished = false;
    response.once("close", () => {
      if (!finished) abort.abort();
    });
    let answer: Response;
    try {
      answer = await entry.fetch(webRequest(request, abort.signal), { parsedBody, authInfo });
    } catch (error) {
      onError(error);
      answer = Response.json(
        { jsonrpc: "2.0", error: { code: -32603, message: "Internal server error" }, id: null },
        { status: 500 },
      );
    }
    const headers: Record<string, string> = {};
    answer.headers.forEach((value, name) => {
      headers[name] = value;
    });
    if (answer.body === null || !headers["content-type"]?.startsWith("text/event-stream")) {
      const body = Buffer.from(await answer.arrayBuffer());
      finished = true;
      response.writeHead(answer.status, { ...headers, "content-length": String(body.length) }).end(body);
      return;
    }
    response.writeHead(answer.status, headers);
    const closed = new Promise<void>((resolve) =>
      abort.signal.addEventListener("abort", () => resolve(), { once: true }),
    );
    const reader = answer.body.getReader();
    try {
      for (let next = await reader.read(); !next.done && !abort.signal.aborted; next = await reader.read()) {
        if (!response.write(next.value)) {
          await Promise.race([new Promise((resolve) => response.once("drain", resolve)), closed]);
        }
      }
    } catch {
      // The stream failed or the client went away: nothing more to send.
    } finally {
      void reader.cancel().catch(() => {});
    }
    finished = true;
    response.end();
  };
}
