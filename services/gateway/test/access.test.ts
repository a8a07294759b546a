import { Metadata } from "@grpc/grpc-js";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { eventually } from "@unimatrix/service-kit/testing";
import { EventSource } from "eventsource";
import { call, connectJson, type System, seedTenant, startSystem } from "./system";

const CONSOLE = "https://console.example.com";

describe("access: rotation ends streams, MCP checks Origin", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    system = await startSystem("gw_access", { mcpAllowedOrigins: [CONSOLE] });
    acme = await seedTenant(system, "acme", 2);
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  const rotate = (clientId: string) =>
    call<{ token: string }>(
      system,
      "unimatrix.cube.v1.IdentityService/RotateClientCredential",
      { clientId },
      acme.user,
    );

  test("an SSE stream opened with a client token ends with access_revoked within 6 s of rotation", async () => {
    const agent = acme.clients[0]!;
    const events: string[] = [];
    const source = new EventSource(`${system.url}/v1/cubes/${acme.cubeId}/events`, {
      fetch: (input, init) =>
        fetch(input, {
          ...init,
          headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${agent.token}` },
        }),
    });
    for (const type of ["ready", "access_revoked"]) source.addEventListener(type, () => events.push(type));
    try {
      await eventually(() => events.includes("ready"), "ready");
      await rotate(agent.id);
      await eventually(() => events.includes("access_revoked"), "access_revoked after rotation", 6_000);
      expect(events.at(-1)).toBe("access_revoked");
    } finally {
      source.close();
    }
  }, 30_000);

  test("a gRPC stream of a client ends with access_revoked naming the rotation", async () => {
    const agent = acme.clients[1]!;
    const activity = createClient(ActivityService, `127.0.0.1:${system.cube.port}`);
    const metadata = new Metadata();
    metadata.set("authorization", `Bearer ${agent.token}`);
    const seen: { case: string | undefined; reason?: string }[] = [];
    const stream = activity.subscribeActivity({ cubeId: acme.cubeId }, { metadata });
    const done = (async () => {
      for await (const message of stream) {
        const event = message.event;
        seen.push({ case: event.case, ...(event.case === "accessRevoked" ? { reason: event.value.reason } : {}) });
      }
    })();
    await eventually(() => seen.some((e) => e.case === "ready"), "ready");
    await rotate(agent.id);
    await eventually(() => seen.some((e) => e.case === "accessRevoked"), "accessRevoked after rotation", 6_000);
    await done;
    expect(seen.at(-1)).toEqual({ case: "accessRevoked", reason: "client credential rotated" });
    activity.close();
  }, 30_000);

  test("MCP: a request with an Origin not on GATEWAY_MCP_ALLOWED_ORIGINS is 403; listed or absent is served", async () => {
    const initialize = (origin?: string) =>
      fetch(`${system.url}/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          authorization: `Bearer ${acme.user}`,
          ...(origin ? { origin } : {}),
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
        }),
      });
    const evil = await initialize("https://evil.example");
    expect(evil.status).toBe(403);
    await evil.text();
    for (const origin of [undefined, CONSOLE]) {
      const served = await initialize(origin);
      expect(served.status).toBe(200);
      await served.text();
    }
  });
});

describe("access: unknown enum names in JSON are INVALID_ARGUMENT, never a dropped filter", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    system = await startSystem("gw_enums");
    acme = await seedTenant(system, "acme", 1);
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  test.each([
    ["unimatrix.device.v1.AuditService/ListAuditEvents", { eventTypes: ["X_BOGUS"] }, /event_types/],
    ["unimatrix.device.v1.DeviceService/ListDevices", { status: "X_BOGUS" }, /status/],
    ["unimatrix.device.v1.DeviceService/ListDevices", { status: 99 }, /status/],
    ["unimatrix.cube.v1.CubeService/CreateRole", { cubeId: "", name: "r", roleClass: "X_BOGUS" }, /role_class/],
  ])("%s %j → 400 invalid_argument naming the field", async (path, body, field) => {
    const request = "cubeId" in body ? { ...body, cubeId: acme.cubeId } : body;
    const { status: httpStatus, body: answer } = await connectJson(system, path, request, acme.user);
    expect(httpStatus).toBe(400);
    expect(answer.code).toBe("invalid_argument");
    expect(String(answer.message)).toMatch(field);
  });
});
