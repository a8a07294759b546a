import { mkdtempSync, statSync } from "node:fs";
import { request } from "node:http";
import { connect, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DoorClient, openDoor } from "@unimatrix/machine";

/** One HTTP exchange on the door's socket: status and body. */
function http(
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; socketPath: string },
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: init.socketPath, path, method: init.method ?? "POST", headers: init.headers ?? {}, agent: false },
      (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on("error", reject);
    req.end(init.body ?? "");
  });
}

describe("the door's HTTP face (what the unimatrix-hook sh client speaks)", () => {
  const door = join(mkdtempSync(join(tmpdir(), "umx-door-http-")), "run", "machine.sock");
  /** What the handler saw, in order: op and the connection's number. */
  const seen: string[] = [];
  const connections = new WeakMap<Socket, number>();
  let count = 0;
  let server: Server;

  beforeAll(async () => {
    server = await openDoor(door, (req, connection) => {
      if (!connections.has(connection)) connections.set(connection, ++count);
      seen.push(`${String(req.op)}#${connections.get(connection)}${req.ids ? ` ${JSON.stringify(req.ids)}` : ""}`);
      if (req.op === "take")
        return { ok: true, items: [{ id: "n1", cubeId: "c", entryId: "e", text: "[REPLY] q: 42" }] };
      if (req.op === "status") return { ok: true, linked: false };
      return { ok: true };
    });
  });
  afterAll(() => server.close());
  beforeEach(() => {
    seen.length = 0;
  });

  it("answers the hook's exact stdout bytes; handed on the same connection hands what it answered", async () => {
    // curl would do both on one kept-alive connection; an Agent keeps it alive here.
    const { Agent } = await import("node:http");
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const hook = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        { socketPath: door, path: "/v1/hook/stop", method: "POST", agent, headers: { "x-unimatrix-drone-token": "t" } },
        (res) => {
          let body = "";
          res.setEncoding("utf8").on("data", (c: string) => (body += c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ session_id: "s" }));
    });
    expect(hook).toEqual({
      status: 200,
      body: `${JSON.stringify({ decision: "block", reason: "New messages from your team:\n[REPLY] q: 42" })}\n`,
    });
    const handed = await new Promise<number>((resolve, reject) => {
      const req = request({ socketPath: door, path: "/v1/handed", method: "POST", agent }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      });
      req.on("error", reject);
      req.end();
    });
    agent.destroy();
    expect(handed).toBe(204);
    expect(seen).toEqual(["take#1", 'handed#1 ["n1"]']);
  });

  it("a handed on another connection hands nothing", async () => {
    expect((await http("/v1/hook/post-tool-use", { socketPath: door, body: '{"session_id":"s"}' })).status).toBe(200);
    expect((await http("/v1/handed", { socketPath: door })).status).toBe(204);
    expect(seen).toEqual([expect.stringMatching(/^take#\d+$/), expect.stringMatching(/^handed#\d+ \[\]$/)]);
  });

  it("a caller's mistake is 400 naming the field; other paths 404, other methods 405, an Origin 403; never a CORS header", async () => {
    const cases: [string, Parameters<typeof http>[1], number, RegExp][] = [
      ["/v1/hook/stop", { socketPath: door, body: '{"x":1}' }, 400, /session_id/],
      ["/v1/hook/stop", { socketPath: door, body: "not json" }, 400, /not JSON/],
      [
        "/v1/hook/stop",
        { socketPath: door, body: '{"session_id":"s"}', headers: { "x-unimatrix-format": "yaml" } },
        400,
        /x-unimatrix-format/,
      ],
      [
        "/v1/hook/stop",
        { socketPath: door, body: '{"session_id":"s"}', headers: { "x-unimatrix-harness": "h".repeat(65) } },
        400,
        /x-unimatrix-harness/,
      ],
      ["/v1/hook/nope", { socketPath: door, body: "{}" }, 404, /unknown hook event nope/],
      ["/", { socketPath: door, method: "GET" }, 404, /no such path/],
      ["/v1/hook/stop", { socketPath: door, method: "GET" }, 405, /POST/],
      [
        "/v1/hook/stop",
        { socketPath: door, body: '{"session_id":"s"}', headers: { origin: "http://evil.example" } },
        403,
        /local/,
      ],
    ];
    for (const [path, init, status, message] of cases) {
      const res = await http(path, init);
      expect({ path, status: res.status }).toEqual({ path, status });
      expect(res.body).toMatch(message);
      expect(Object.keys(res.headers).filter((h) => h.startsWith("access-control"))).toEqual([]);
    }
    expect(seen).toEqual([]);
  });

  it("the JSON-lines protocol still answers on the same socket, which stays owner-only", async () => {
    const client = await DoorClient.connect(door);
    expect(await client.request({ op: "status" })).toEqual({ ok: true, linked: false });
    client.close();
    expect(statSync(door).mode & 0o777).toBe(0o600);
  });

  it("a handed written just before the client goes away is handed before the connection's close is seen", async () => {
    // The native client writes `handed` and exits without reading its answer: the door must hand
    // the items as it reads the request, before the close that would put them back.
    const path = join(mkdtempSync(join(tmpdir(), "umx-door-gone-")), "machine.sock");
    const order: string[] = [];
    const gone = await openDoor(
      path,
      (req) => {
        order.push(`${String(req.op)}${req.ids ? ` ${JSON.stringify(req.ids)}` : ""}`);
        return req.op === "take"
          ? { ok: true, items: [{ id: "n1", cubeId: "c", entryId: "e", text: "[DIRECT] a: hi" }] }
          : { ok: true };
      },
      { onClose: () => order.push("close") },
    );
    try {
      const socket = connect(path);
      const body = JSON.stringify({ session_id: "s" });
      socket.write(
        `POST /v1/hook/post-tool-use HTTP/1.1\r\nHost: door\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      let answer = "";
      await new Promise<void>((resolve) =>
        socket.on("data", (chunk: Buffer) => {
          answer += chunk.toString("utf8");
          if (answer.includes("[DIRECT] a: hi")) resolve();
        }),
      );
      socket.end("POST /v1/handed HTTP/1.1\r\nHost: door\r\nContent-Length: 0\r\n\r\n");
      await new Promise((resolve) => socket.on("close", resolve));
      await new Promise<void>((resolve) => {
        const check = () => (order.includes("close") ? resolve() : setImmediate(check));
        check();
      });
      expect(order).toEqual(["take", 'handed ["n1"]', "close"]);
    } finally {
      gone.close();
    }
  });
});
