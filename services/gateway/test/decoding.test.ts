import * as grpc from "@grpc/grpc-js";
import { call, type System, seedTenant, startSystem } from "./system";

/** The bytes `0a ff`: field 1 (length-delimited) with a length that runs past the end. */
const UNDECODABLE = Uint8Array.of(0x0a, 0xff);

function envelope(flags: number, payload: Uint8Array): Uint8Array {
  const frame = new Uint8Array(5 + payload.length);
  frame[0] = flags;
  new DataView(frame.buffer).setUint32(1, payload.length);
  frame.set(payload, 5);
  return frame;
}

describe("decoding errors are the caller's (INVALID_ARGUMENT, never INTERNAL)", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    system = await startSystem("gw_decoding");
    acme = await seedTenant(system, "acme", 1);
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  const post = (path: string, contentType: string, body: Uint8Array, headers: Record<string, string> = {}) =>
    fetch(`${system.url}/${path}`, {
      method: "POST",
      headers: { "content-type": contentType, authorization: `Bearer ${acme.user}`, ...headers },
      body: Buffer.from(body),
    });

  test("Connect unary application/proto `0a ff` → 400 invalid_argument naming the field (cube_id)", async () => {
    const response = await post("unimatrix.cube.v1.CubeService/GetCube", "application/proto", UNDECODABLE);
    expect(response.status).toBe(400);
    const body = (await response.json()) as { code: string; message: string };
    expect(body.code).toBe("invalid_argument");
    expect(body.message).toMatch(/^cube_id: is not a valid unimatrix\.cube\.v1\.GetCubeRequest message/);
  });

  test("gRPC-Web: an undecodable message and a compressed flag without an encoding → grpc-status 3", async () => {
    for (const [frame, field] of [
      [envelope(0, UNDECODABLE), "cube_id"],
      [envelope(1, Uint8Array.of(1, 2, 3)), "request"],
      [Uint8Array.of(0, 0, 0), "request"],
    ] as const) {
      const response = await post("unimatrix.cube.v1.CubeService/GetCube", "application/grpc-web+proto", frame);
      expect(response.status).toBe(200);
      expect(response.headers.get("grpc-status")).toBe(String(grpc.status.INVALID_ARGUMENT));
      expect(decodeURIComponent(response.headers.get("grpc-message") ?? "")).toMatch(new RegExp(`^${field}: `));
    }
  });

  test("Connect streaming: an undecodable request ends the stream with invalid_argument", async () => {
    const response = await post(
      "unimatrix.cube.v1.ActivityService/SubscribeActivity",
      "application/connect+proto",
      envelope(0, UNDECODABLE),
    );
    expect(response.status).toBe(200);
    const bytes = new Uint8Array(await response.arrayBuffer());
    expect(bytes[0]).toBe(0x02);
    const end = JSON.parse(new TextDecoder().decode(bytes.subarray(5))) as { error: { code: string } };
    expect(end.error.code).toBe("invalid_argument");
  });

  test("a well-formed binary body still goes through", async () => {
    const response = await post("unimatrix.cube.v1.CubeService/ListCubes", "application/proto", new Uint8Array(0));
    expect(response.status).toBe(200);
  });

  test("gRPC: an undecodable unary request and an undecodable Link frame → INVALID_ARGUMENT", async () => {
    const raw = (port: number) => new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const cube = raw(system.cube.port);
    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${acme.user}`);
    const unary = await new Promise<grpc.ServiceError>((resolve) => {
      cube.makeUnaryRequest(
        "/unimatrix.cube.v1.CubeService/GetCube",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from(UNDECODABLE),
        metadata,
        (error) => resolve(error!),
      );
    });
    expect(unary.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(unary.details).toMatch(/^cube_id: is not a valid unimatrix\.cube\.v1\.GetCubeRequest/);
    cube.close();

    const machine = await call<{ token: string }>(
      system,
      "unimatrix.presence.v1.MachineService/RegisterMachine",
      { name: "decoder" },
      acme.user,
    );
    const presence = raw(system.presence.port);
    const linkMetadata = new grpc.Metadata();
    linkMetadata.set("authorization", `Bearer ${machine.token}`);
    const link = presence.makeBidiStreamRequest(
      "/unimatrix.presence.v1.LinkService/Link",
      (b: Buffer) => b,
      (b: Buffer) => b,
      linkMetadata,
    );
    const ended = new Promise<grpc.ServiceError>((resolve) => {
      link.on("error", resolve);
      link.on("data", () => {});
    });
    link.write(Buffer.from(UNDECODABLE));
    const error = await ended;
    expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(error.details).toMatch(/^hello: /);
    presence.close();
  });
});
