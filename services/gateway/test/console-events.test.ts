import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { eventually } from "@unimatrix/service-kit/testing";
import { openEventStream, type StreamState } from "../web/src/events";

/**
 * The console's SSE reader (web/src/events.ts) runs on fetch + ReadableStream, which Node has too:
 * these tests drive it against a real HTTP server that splits frames at awkward places, drops the
 * connection, and refuses tokens — the cases a browser meets on a bad network.
 */
describe("console: SSE reader", () => {
  let server: Server;
  let base: string;
  let handler: (request: IncomingMessage, response: ServerResponse) => void = () => {};

  beforeAll(async () => {
    server = createServer((request, response) => handler(request, response));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const sse = (response: ServerResponse) =>
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });

  it("parses split chunks, CRLF, comments and multi-line data, then resumes from the last id after a drop", async () => {
    const seen: { type: string; data: unknown; id: string | undefined }[] = [];
    const states: StreamState[] = [];
    const requests: { auth?: string; lastEventId?: string; url?: string }[] = [];
    handler = (request, response) => {
      requests.push({
        auth: request.headers.authorization,
        lastEventId: request.headers["last-event-id"] as string | undefined,
        url: request.url,
      });
      sse(response);
      if (requests.length === 1) {
        const text =
          'retry: 2000\r\n\r\n: heartbeat\r\nevent: entry\r\nid: 7\r\ndata: {"n":1}\r\n\r\nevent: entry\nid: 8\ndata: {"lines":\ndata: 2}\n\nevent: ready\nid: 8\ndata: {}\n\nevent: entry\nid: 9\ndata: {"n":3}\n\n';
        const cuts = [5, 12, 17, 30, 31, 48, 64, 90, 120, text.length]; // 12 and 48 split a CRLF
        // Each piece goes out on its own, a few milliseconds apart, so the reader gets them as
        // separate chunks.
        void (async () => {
          let from = 0;
          for (const cut of cuts) {
            await new Promise<void>((resolve) => response.write(text.slice(from, cut), () => setTimeout(resolve, 5)));
            from = cut;
          }
          response.destroy();
        })();
      } else {
        response.write('event: entry\nid: 10\ndata: {"n":4}\n\nevent: ready\nid: 10\ndata: {}\n\n');
      }
    };
    const stream = openEventStream({
      path: `${base}/v1/cubes/c/events`,
      token: () => "umx_client_secret",
      lastEventId: "",
      readyEvents: ["ready"],
      terminalEvents: ["access_revoked"],
      onEvent: (type, data, id) => seen.push({ type, data, id }),
      onState: (state) => states.push(state),
      initialDelayMs: 10,
      maxDelayMs: 50,
    });
    try {
      await eventually(() => seen.some((e) => (e.data as { n?: number }).n === 4), "the event after the reconnect");
      expect(seen.map((e) => [e.type, e.id])).toEqual([
        ["entry", "7"],
        ["entry", "8"],
        ["ready", "8"],
        ["entry", "9"],
        ["entry", "10"],
        ["ready", "10"],
      ]);
      expect(seen[1]!.data).toEqual({ lines: 2 });
      expect(requests).toHaveLength(2);
      // First connect: everything retained (`?after=`), token in the header only.
      expect(requests[0]).toEqual({
        auth: "Bearer umx_client_secret",
        lastEventId: undefined,
        url: "/v1/cubes/c/events?after=",
      });
      // Reconnect: from the last id seen, in the header.
      expect(requests[1]).toEqual({ auth: "Bearer umx_client_secret", lastEventId: "9", url: "/v1/cubes/c/events" });
      expect(states).toEqual(["connecting", "live", "reconnecting", "live"]);
      expect(stream.lastEventId()).toBe("10");
    } finally {
      stream.close();
    }
  });

  it("stops for good on 401 and on a terminal event, without retrying", async () => {
    let calls = 0;
    handler = (_request, response) => {
      calls += 1;
      response.writeHead(401, { "content-type": "application/json" });
      response.end(JSON.stringify({ code: "unauthenticated", message: "token revoked" }));
    };
    const states: [StreamState, string][] = [];
    const refused = openEventStream({
      path: `${base}/v1/machines/events`,
      token: () => "umx_user_x",
      readyEvents: ["machine_ready"],
      terminalEvents: ["access_revoked"],
      onEvent: () => {},
      onState: (state, detail) => states.push([state, detail]),
      initialDelayMs: 10,
    });
    await eventually(() => states.some(([state]) => state === "ended"), "the stream to end");
    await refused.stopped;
    refused.close();
    expect(states).toEqual([
      ["connecting", ""],
      ["ended", "token revoked"],
    ]);
    expect(calls).toBe(1);

    calls = 0;
    handler = (_request, response) => {
      calls += 1;
      sse(response);
      response.write("event: machine_ready\nid: 3\ndata: {}\n\nevent: access_revoked\ndata: {}\n\n");
    };
    const events: string[] = [];
    const revoked = openEventStream({
      path: `${base}/v1/machines/events`,
      token: () => "umx_user_x",
      readyEvents: ["machine_ready"],
      terminalEvents: ["access_revoked"],
      onEvent: (type) => events.push(type),
      onState: () => {},
      initialDelayMs: 10,
    });
    await eventually(() => events.includes("access_revoked"), "access_revoked");
    // The reader says it stopped for good (a retrying one never would): no fixed wait.
    await revoked.stopped;
    revoked.close();
    expect(events).toEqual(["machine_ready", "access_revoked"]);
    expect(calls).toBe(1);
  });
});
