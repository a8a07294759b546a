import { gzipSync } from "node:zlib";
import { toBinary, toJson } from "@bufbuild/protobuf";
import { publicMethods } from "@unimatrix/app";
import { validRequest } from "@unimatrix/service-kit/testing";
import { connectCall, servedByGateway } from "./sweep/transports";
import { type System, seedTenant, startSystem } from "./system";

/** Field number + wire type + payload bytes. */
function rawField(number: number, wireType: number, payload: number[]): Uint8Array {
  return Uint8Array.from([(number << 3) | wireType, ...payload]);
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function envelope(flags: number, payload: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + payload.length);
  frame[0] = flags;
  frame.writeUInt32BE(payload.length, 1);
  frame.set(payload, 5);
  return frame;
}

/** The Connect end-stream error of a streaming answer. */
function endStreamError(bytes: Uint8Array): { code: string; message: string } | undefined {
  const frame = Buffer.from(bytes);
  if (frame[0] !== 0x02) return undefined;
  return (JSON.parse(frame.subarray(5, 5 + frame.readUInt32BE(1)).toString("utf8")) as { error?: never }).error;
}

const LIMIT = 64 * 1024;
const methods = publicMethods()
  .map(({ method }) => method)
  .filter(servedByGateway);

describe("issue 25 items 9, 10 and 12: what the edge answers for bodies it refuses and routes it does not serve", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    system = await startSystem("gw_edge_refusals", { rateLimitPerSecond: 0, maxBodyBytes: LIMIT });
    acme = await seedTenant(system, "acme", 1);
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  const post = (path: string, type: string, body: Uint8Array, headers: Record<string, string> = {}) =>
    fetch(`${system.url}/${path}`, {
      method: "POST",
      headers: { "content-type": type, authorization: `Bearer ${acme.user}`, ...headers },
      body: Buffer.from(body),
    });

  test("item 10: binary invalid UTF-8 and a wrong wire type in every string field name that field", async () => {
    const failures: string[] = [];
    let sent = 0;
    for (const method of methods) {
      const base = toBinary(method.input, validRequest(method.input, { cube_id: acme.cubeId }));
      for (const field of method.input.fields) {
        if (field.fieldKind !== "scalar" || field.scalar !== 9) continue;
        const bad = [
          ["invalid UTF-8", rawField(field.number, 2, [3, 0x61, 0xff, 0xfe])],
          ["a varint", rawField(field.number, 0, [5])],
          ["a truncated length", rawField(field.number, 2, [0x7f, 0x61])],
        ] as const;
        for (const [what, bytes] of bad) {
          const answer = await connectCall(system, method, "proto", concat(base, bytes), acme.user);
          sent++;
          if (answer.code !== "invalid_argument" || !answer.message.startsWith(`${field.name}: `))
            failures.push(`${method.name} ${field.name} ← ${what}: ${answer.http} ${answer.code} ${answer.message}`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(100);
  }, 300_000);

  test("item 10: JSON timestamps that do not decode name their field (top-level and nested)", async () => {
    const failures: string[] = [];
    let sent = 0;
    for (const method of methods) {
      const base = toJson(method.input, validRequest(method.input, { cube_id: acme.cubeId })) as Record<
        string,
        unknown
      >;
      for (const field of method.input.fields) {
        if (field.fieldKind !== "message" || field.message.typeName !== "google.protobuf.Timestamp") continue;
        for (const value of ["yesterday", { seconds: 1 }, "99999-01-01T00:00:00Z", 12]) {
          const body = Buffer.from(JSON.stringify({ ...base, [field.jsonName]: value }));
          const answer = await connectCall(system, method, "json", body, acme.user);
          sent++;
          if (answer.code !== "invalid_argument" || !answer.message.startsWith(`${field.name}: `))
            failures.push(`${method.name} ${field.name} ← ${JSON.stringify(value)}: ${answer.code} ${answer.message}`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThanOrEqual(12); // DronesSince.since_time, ListAuditEvents.start_time and end_time
  }, 120_000);

  test("item 9: a body over the limit is 413 with Connect error JSON (JSON, binary, gzip bomb), never 429", async () => {
    const path = "unimatrix.cube.v1.ActivityService/AppendEntry";
    const big = JSON.stringify({ cubeId: acme.cubeId, message: "x".repeat(LIMIT * 2) });
    // 10 MiB of JSON in about 10 KiB of gzip: small on the wire, over the limit once decompressed.
    const bomb = gzipSync(Buffer.from(JSON.stringify({ cubeId: acme.cubeId, message: "x".repeat(10 << 20) })));
    expect(bomb.length).toBeLessThan(LIMIT);
    const answers = [
      await post(path, "application/json", Buffer.from(big)),
      await post(path, "application/proto", new Uint8Array(LIMIT * 2).fill(0x20)),
      await post(path, "application/proto", new Uint8Array(10 << 20)), // 10 MiB, as in the report
      await post(path, "application/json", bomb, { "content-encoding": "gzip" }),
    ];
    for (const response of answers) {
      expect(response.status).toBe(413);
      expect(response.headers.get("content-type")).toMatch(/^application\/json/);
      expect(await response.json()).toEqual({
        code: "invalid_argument",
        message: `request: body is larger than the limit of ${LIMIT} bytes`,
      });
    }
  });

  test("a compressed body within the limit still goes through; a corrupt one is 400", async () => {
    const path = "unimatrix.cube.v1.CubeService/GetCube";
    const body = gzipSync(Buffer.from(JSON.stringify({ cubeId: acme.cubeId })));
    const ok = await post(path, "application/json", body, { "content-encoding": "gzip" });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { cube: { id: string } }).cube.id).toBe(acme.cubeId);
    const corrupt = await post(path, "application/json", body.subarray(0, 12), { "content-encoding": "gzip" });
    expect(corrupt.status).toBe(400);
    expect(((await corrupt.json()) as { code: string }).code).toBe("invalid_argument");
  });

  test("item 9: a streaming request over the limit ends with the same code; MCP answers 413 too", async () => {
    const streamed = await post(
      "unimatrix.cube.v1.ActivityService/SubscribeActivity",
      "application/connect+proto",
      envelope(0, new Uint8Array(LIMIT * 2)),
    );
    expect(streamed.status).toBe(200);
    expect(endStreamError(new Uint8Array(await streamed.arrayBuffer()))).toEqual({
      code: "invalid_argument",
      message: `request: body is larger than the limit of ${LIMIT} bytes`,
    });
    const gzipped = await post(
      "unimatrix.cube.v1.ActivityService/SubscribeActivity",
      "application/connect+json",
      envelope(1, gzipSync(Buffer.from(JSON.stringify({ cubeId: "x".repeat(4 << 20) })))),
      { "connect-content-encoding": "gzip" },
    );
    expect(endStreamError(new Uint8Array(await gzipped.arrayBuffer()))?.code).toBe("invalid_argument");

    const mcp = await fetch(`${system.url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        authorization: `Bearer ${acme.clients[0]!.token}`,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping", params: { pad: "x".repeat(LIMIT * 2) } }),
    });
    expect(mcp.status).toBe(413);
  });

  test("deliverable 6: a route the gateway does not serve answers 404 with Connect error JSON", async () => {
    for (const [method, path] of [
      ["POST", "/unimatrix.cube.v1.NoSuchService/Nothing"],
      ["POST", "/unimatrix.cube.v1.CubeService/NoSuchMethod"],
      ["GET", "/no/such/route"],
      ["GET", "/metrics"],
      ["POST", "/v1/machines/events"],
    ] as const) {
      const response = await fetch(`${system.url}${path}`, {
        method,
        headers: { "content-type": "application/json", authorization: `Bearer ${acme.user}` },
        ...(method === "POST" ? { body: "{}" } : {}),
      });
      expect([path, response.status, response.headers.get("content-type")]).toEqual([path, 404, "application/json"]);
      expect(await response.json()).toEqual({ code: "not_found", message: "no such route" });
    }
  });
});
