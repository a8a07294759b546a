import { connect as connectTcp } from "node:net";
import { createClient as createConnectClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { PRINCIPAL_HEADER, signPrincipal } from "@unimatrix/service-kit/auth";
import { TEST_INTERNAL_KEY } from "@unimatrix/service-kit/testing";
import { call, connectJson, OPERATOR_TOKEN, type System, seedTenant, startSystem } from "./system";

describe("gateway: Connect/HTTP", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let globex: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    system = await startSystem("gw_connect");
    acme = await seedTenant(system, "acme", 2);
    globex = await seedTenant(system, "globex", 1);
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  it("creates, attaches, posts and reads with Connect JSON over fetch", async () => {
    const agent = acme.clients[0]!;
    const seat = await call<{ outcome: string; drone: { id: string }; sessionToken: string }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: acme.cubeId, roleId: acme.roleId, hostname: "laptop" },
      agent.token,
    );
    expect(seat.outcome).toBe("ATTACH_SEAT_OUTCOME_CREATED");
    const posted = await call<{ entry: { id: string; message: string; cursor: string } }>(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      { cubeId: acme.cubeId, message: "hello from fetch", visibility: "VISIBILITY_BROADCAST" },
      seat.sessionToken,
    );
    expect(posted.entry.message).toBe("hello from fetch");
    const read = await call<{ items: { entry?: { id: string; message: string } }[] }>(
      system,
      "unimatrix.cube.v1.ActivityService/ReadActivity",
      { cubeId: acme.cubeId },
      acme.user,
    );
    expect(read.items.map((item) => item.entry?.message)).toContain("hello from fetch");
  });

  it("serves the same RPCs with the Connect binary protocol and gRPC-Web", async () => {
    const headers = { authorization: `Bearer ${acme.user}` };
    for (const transport of [
      createConnectTransport({ baseUrl: system.url, httpVersion: "1.1", useBinaryFormat: true }),
      createGrpcWebTransport({ baseUrl: system.url, httpVersion: "1.1" }),
    ]) {
      const client = createConnectClient(CubeService, transport);
      const reply = await client.getCube({ cubeId: acme.cubeId }, { headers });
      expect(reply.cube?.id).toBe(acme.cubeId);
      expect(reply.cube?.name).toBe("acme cube");
    }
  });

  it.each([
    ["a malformed id", { cubeId: "not-a-uuid" }, 400, "invalid_argument"],
    ["another tenant's cube", { cubeId: "" }, 404, "not_found"],
  ])("maps %s to the Connect error and HTTP status", async (_what, body, httpStatus, code) => {
    const request = body.cubeId === "" ? { cubeId: globex.cubeId } : body;
    const { status, body: answer } = await connectJson(
      system,
      "unimatrix.cube.v1.CubeService/GetCube",
      request,
      acme.user,
    );
    expect(status).toBe(httpStatus);
    expect(answer.code).toBe(code);
    expect(typeof answer.message).toBe("string");
  });

  it("refuses calls without a valid token, whatever else they carry", async () => {
    const path = "unimatrix.cube.v1.CubeService/ListCubes";
    const cases: [string | undefined, Record<string, string>][] = [
      [undefined, {}],
      ["umx_client_garbage", {}],
      ["not-even-a-token", {}],
      ["umx_operator_wrong-operator-token-000", {}],
      // A principal header forged from outside is ignored: still no credential.
      [
        undefined,
        {
          [PRINCIPAL_HEADER]: signPrincipal(
            { kind: "operator", subjectId: "operator", tenantId: null },
            TEST_INTERNAL_KEY,
          ),
        },
      ],
    ];
    for (const [token, headers] of cases) {
      const { status, body } = await connectJson(system, path, {}, token, headers);
      expect([status, body.code]).toEqual([401, "unauthenticated"]);
      expect(body).not.toHaveProperty("cubes");
    }
  });

  it("stops honouring a revoked client token within the cache bound", async () => {
    const victim = await call<{ client: { id: string }; token: string }>(
      system,
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name: "short-lived" },
      acme.user,
    );
    expect((await connectJson(system, "unimatrix.cube.v1.CubeService/ListCubes", {}, victim.token)).status).toBe(200);
    await call(system, "unimatrix.cube.v1.IdentityService/RevokeClient", { clientId: victim.client.id }, acme.user);
    system.gateway.auth.clear(); // the 5 s bound, without waiting 5 s
    const after = await connectJson(system, "unimatrix.cube.v1.CubeService/ListCubes", {}, victim.token);
    expect([after.status, after.body.code]).toEqual([401, "unauthenticated"]);
  });

  it("answers a malformed request target with 400 and stays up", async () => {
    const port = new URL(system.url).port;
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connectTcp(Number(port), "127.0.0.1", () => {
        socket.write("GET http://[x/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      });
      let text = "";
      socket.on("data", (chunk) => {
        text += chunk.toString();
      });
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    const badEscape = await fetch(`${system.url}/v1/cubes/%E0/events`, {
      headers: { authorization: `Bearer ${acme.user}` },
    });
    expect(badEscape.status).toBe(400);
    expect((await fetch(`${system.url}/healthz`)).status).toBe(200);
  });

  it("enrolls a device with only the enroll token in the body (no bearer)", async () => {
    const issued = await call<{ token: string }>(
      system,
      "unimatrix.device.v1.EnrollmentService/IssueEnrollToken",
      { ttlSeconds: 600 },
      acme.user,
    );
    const enrolled = await connectJson(system, "unimatrix.device.v1.DeviceService/EnrollDevice", {
      enrollToken: issued.token,
      publicKey: "Z2F0ZXdheS1lbnJvbGwtdGVzdC1rZXk=",
      platform: "DEVICE_PLATFORM_LINUX",
    });
    expect(enrolled.status).toBe(200);
    expect((enrolled.body.device as { publicKey: string }).publicKey).toBe("Z2F0ZXdheS1lbnJvbGwtdGVzdC1rZXk=");
    const wrong = await connectJson(system, "unimatrix.device.v1.DeviceService/EnrollDevice", {
      enrollToken: "umx_enroll_nope_nope",
      publicKey: "b3RoZXIta2V5",
      platform: "DEVICE_PLATFORM_LINUX",
    });
    expect([wrong.status, wrong.body.code]).toEqual([401, "unauthenticated"]);
  });

  it("writes fields at their defaults in JSON answers: a stale heartbeat reads {ok: false}, not {}", async () => {
    const issued = await call<{ token: string }>(
      system,
      "unimatrix.device.v1.EnrollmentService/IssueEnrollToken",
      { ttlSeconds: 600 },
      acme.user,
    );
    const enrolled = await call<{ device: { id: string }; deviceToken: string; replayed: boolean }>(
      system,
      "unimatrix.device.v1.DeviceService/EnrollDevice",
      { enrollToken: issued.token, publicKey: "ZGVmYXVsdHMtYXJlLXdyaXR0ZW4=", platform: "DEVICE_PLATFORM_LINUX" },
    );
    expect(enrolled.replayed).toBe(false);
    const deviceId = enrolled.device.id;
    const acquire = () =>
      call<{ generation: string }>(
        system,
        "unimatrix.device.v1.DeviceService/AcquireConnection",
        { deviceId },
        enrolled.deviceToken,
      );
    const first = await acquire();
    await acquire(); // fences the first generation
    const stale = { deviceId, generation: first.generation };
    for (const rpc of ["HeartbeatConnection", "ReleaseConnection"]) {
      const answer = await connectJson(system, `unimatrix.device.v1.DeviceService/${rpc}`, stale, enrolled.deviceToken);
      expect([rpc, answer.status, answer.body]).toEqual([rpc, 200, { ok: false }]);
    }
  });

  it("keeps internal RPCs off the public surface", async () => {
    const { status, body } = await connectJson(
      system,
      "unimatrix.cube.v1.IdentityService/Authenticate",
      { token: acme.user },
      OPERATOR_TOKEN,
    );
    expect([status, body.code]).toEqual([501, "unimplemented"]);
    expect(body).not.toHaveProperty("principal");
  });

  it("answers CORS preflights for allowed origins only", async () => {
    const preflight = (origin: string) =>
      fetch(`${system.url}/unimatrix.cube.v1.CubeService/ListCubes`, {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization" },
      });
    const allowed = await preflight("https://console.example.com");
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://console.example.com");
    expect(allowed.headers.get("access-control-allow-headers")).toMatch(/Authorization/);
    const refused = await preflight("https://evil.example.com");
    expect(refused.status).toBe(403);
    expect(refused.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("refuses bodies over the size limit", async () => {
    const { status, body } = await connectJson(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      { cubeId: acme.cubeId, message: "x".repeat(2 * 1024 * 1024) },
      acme.user,
    );
    // 413 (not Connect's 429 resource_exhausted: "retry later"), before any upstream call (docs/decisions.md).
    expect([status, body.code]).toEqual([413, "invalid_argument"]);
  });

  it("exports Prometheus metrics by route, method, status and Connect code on the metrics port only", async () => {
    const text = await (await fetch(system.metricsUrl)).text();
    expect(text).toMatch(
      /unimatrix_gateway_requests_total\{route="\/unimatrix\.cube\.v1\.CubeService\/ListCubes",method="POST",code="401",rpc_code="unauthenticated"\} \d+/,
    );
    expect((await fetch(`${system.url}/metrics`)).status).toBe(404);
    expect(text).toMatch(/unimatrix_gateway_request_duration_seconds_bucket/);
    expect(text).toMatch(/unimatrix_gateway_open_streams/);
  });
});

describe("gateway: rate limits", () => {
  let system: System;
  beforeAll(async () => {
    system = await startSystem("gw_rate", { rateLimitPerSecond: 0.001, rateLimitBurst: 3 });
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  it("answers 429 / resource_exhausted once a credential spends its burst, and not for another credential", async () => {
    const tenant = await call<{ adminUserToken: string }>(
      system,
      "unimatrix.cube.v1.IdentityService/CreateTenant",
      { name: "limited", adminDisplayName: "admin" },
      OPERATOR_TOKEN,
    );
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      statuses.push(
        (await connectJson(system, "unimatrix.cube.v1.CubeService/ListCubes", {}, tenant.adminUserToken)).status,
      );
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    const limited = await connectJson(system, "unimatrix.cube.v1.CubeService/ListCubes", {}, tenant.adminUserToken);
    expect([limited.status, limited.body.code]).toEqual([429, "resource_exhausted"]);
  });

  it("limits token lookups per address, so a flood of unknown tokens does not reach the services", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const token = `umx_client_flood${i}_secret${i}`;
      statuses.push((await connectJson(system, "unimatrix.cube.v1.CubeService/ListCubes", {}, token)).status);
    }
    // Earlier tests in this suite spent this address's burst on lookups; whatever is left is 401, then 429.
    expect(statuses.at(-1)).toBe(429);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
  });
});
