import * as net from "node:net";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import type { SubscribeActivityResponse } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { asBearer, eventually } from "@unimatrix/service-kit/testing";
import { type Harness, newClient, newCube, newTenant, post, type Replica, seat, startHarness } from "./harness";

/** A Redis URL on a port nothing listens on. */
async function unreachableRedis(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return `redis://127.0.0.1:${port}`;
}

/** Reads a SubscribeActivity stream in the background. */
function reader(r: Replica, token: string, cubeId: string) {
  const events: SubscribeActivityResponse[] = [];
  const controller = new AbortController();
  const stream = r.activity.subscribeActivity({ cubeId }, { ...asBearer(token), signal: controller.signal });
  const done = (async () => {
    try {
      for await (const event of stream) events.push(event);
    } catch {
      // cancelled at the end of the test
    }
  })();
  const entries = () => events.flatMap((e) => (e.event.case === "entry" ? [e.event.value.message] : []));
  return { events, entries, cancel: () => controller.abort(), done };
}

// Heartbeats a minute apart: nothing in these tests can be delivered by a heartbeat.
const HEARTBEAT_MS = 60_000;
let h: Harness;
let b: Replica;
beforeAll(async () => {
  const redisUrl = await unreachableRedis();
  h = await startHarness("cube_bus_down", { redisUrl, cube: { heartbeatMs: HEARTBEAT_MS } });
  b = await h.replica({ redisUrl, cube: { heartbeatMs: HEARTBEAT_MS } });
});
afterAll(() => h.close());

describe("cube with Redis unreachable", () => {
  test("starts and answers SERVING", async () => {
    const health = createClient(Health, `127.0.0.1:${h.service.port}`);
    try {
      expect((await health.check({ service: "" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
      expect((await health.check({ service: "unimatrix.cube.v1.ActivityService" })).status).toBe(
        HealthCheckResponse_ServingStatus.SERVING,
      );
    } finally {
      health.close();
    }
  });

  test("a stream gets an append of its own replica at once, and another replica's by the heal poll", async () => {
    const t = await newTenant(h, "busdown");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId } = await newCube(h, owner.token, "down");
    const w = await seat(h, owner.token, cubeId);
    const s = reader(h, t.userToken, cubeId);
    await eventually(() => s.events.some((e) => e.event.case === "ready"), "ready");
    const started = Date.now();
    await post(h, w.token, cubeId, "same replica");
    await eventually(() => s.entries().includes("same replica"), "the same replica's append", 2_000);
    const sameReplicaMs = Date.now() - started;
    await post(b, w.token, cubeId, "other replica");
    await eventually(() => s.entries().includes("other replica"), "the other replica's append", 5_000);
    expect(s.entries()).toEqual(["same replica", "other replica"]);
    expect(sameReplicaMs).toBeLessThan(HEARTBEAT_MS / 10);
    s.cancel();
    await s.done;
  });
});
