import { createClient as createConnectClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { eventually } from "@unimatrix/service-kit/testing";
import { firstAnswer, iterate, sseRefusal, sseStream } from "./stream-probes";
import { addGateway, call, connectJson, type System, seedTenant, startSystem } from "./system";

// A drone session ends by itself: at its expiry every open stream of it ends with access_revoked
// (within 1 s, on both gateways, their caches warm) and a reopen is refused — no news is published.

const SESSION_TTL_MS = 4_000;

describe("every door closes with its credential: session expiry", () => {
  let system: System;
  let second: Awaited<ReturnType<typeof addGateway>>;
  let tenant: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    system = await startSystem("gw_doors_expiry", {}, "postgres", { sessionTtlMs: SESSION_TTL_MS });
    second = await addGateway(system);
    tenant = await seedTenant(system, "expiry", 1);
  }, 120_000);
  afterAll(async () => {
    await second?.stop();
    await system?.stop();
  });

  test("an expired session's SSE and Connect streams on both gateways end with access_revoked within 1 s of its expiry", async () => {
    const seat = await call<{ sessionToken: string; sessionExpiresAt: string }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: tenant.cubeId, roleId: tenant.roleId },
      tenant.clients[0]!.token,
    );
    const expiresAt = Date.parse(seat.sessionExpiresAt);
    const urls = [system.url, second.url];
    for (const url of urls) {
      const { status } = await connectJson(
        { url },
        "unimatrix.cube.v1.CubeService/GetCube",
        { cubeId: tenant.cubeId },
        seat.sessionToken,
      );
      expect(status).toBe(200);
    }
    const streams = urls.flatMap((url) => {
      const controller = new AbortController();
      const connect = createConnectClient(
        ActivityService,
        createConnectTransport({ baseUrl: url, httpVersion: "1.1" }),
      );
      const headers = { authorization: `Bearer ${seat.sessionToken}` };
      return [
        { name: `SSE via ${url}`, opened: sseStream(`${url}/v1/cubes/${tenant.cubeId}/events`, seat.sessionToken) },
        {
          name: `Connect via ${url}`,
          opened: iterate(
            connect.subscribeActivity({ cubeId: tenant.cubeId }, { headers, signal: controller.signal }),
            () => controller.abort(),
          ),
        },
      ];
    });
    try {
      for (const { name, opened } of streams) await eventually(opened.ready, `${name}: ready`, 5_000);
      expect(streams.map(({ opened }) => opened.revoked())).toEqual(streams.map(() => false));
      for (const { name, opened } of streams) {
        await eventually(
          opened.revoked,
          `${name}: access_revoked at expiry`,
          Math.max(0, expiresAt - Date.now()) + 1_000,
        );
      }
      for (const url of urls) {
        expect(await sseRefusal(`${url}/v1/cubes/${tenant.cubeId}/events`, seat.sessionToken)).toBe("401");
        const connect = createConnectClient(
          ActivityService,
          createConnectTransport({ baseUrl: url, httpVersion: "1.1" }),
        );
        const headers = { authorization: `Bearer ${seat.sessionToken}` };
        expect(await firstAnswer(connect.subscribeActivity({ cubeId: tenant.cubeId }, { headers }))).toBe(
          "UNAUTHENTICATED",
        );
      }
    } finally {
      for (const { opened } of streams) opened.close();
    }
  }, 60_000);
});
