import * as net from "node:net";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import type { WatchMachinesResponse } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { testConfig } from "@unimatrix/service-kit/testing";
import { type PresenceService, startPresence } from "../src";
import { as, Collector, eventually, FAST, newTenant, openLink, describe as show, World } from "./helpers";

/** A Redis URL on a port nothing listens on. */
async function unreachableRedis(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return `redis://127.0.0.1:${port}`;
}

const world = new World("presence_bus_down");
let redisUrl: string;
let a: PresenceService;
let b: PresenceService;

async function startDown(busDownPollMs?: number): Promise<PresenceService> {
  const replica = await startPresence({
    config: testConfig({ busPrefix: world.busPrefix, redisUrl }),
    port: 0,
    schema: world.schema.schema,
    clock: world.clock,
    presence: FAST,
    busDownPollMs,
  });
  world.replicas.push(replica);
  return replica;
}

beforeAll(async () => {
  redisUrl = await unreachableRedis();
  // A: no polling to speak of, so only the local doorbell can ring its watchers. B: the default poll.
  a = await startDown(3_600_000);
  b = await startDown();
});
afterAll(() => world.close());

describe("presence with Redis unreachable", () => {
  test("replicas start and answer SERVING", async () => {
    for (const replica of [a, b]) {
      const health = createClient(Health, `127.0.0.1:${replica.port}`);
      world.clients.push(health);
      const { status } = await health.check({ service: "" });
      expect(status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    }
  });

  test("a watcher sees its own replica's transition at once and another replica's by the short poll", async () => {
    const { user } = newTenant();
    const machines = world.machines(a);
    const { token } = await machines.registerMachine({ name: "m1" }, as(user));
    const onA = new Collector<WatchMachinesResponse>(machines.watchMachines({}, as(user)));
    const onB = new Collector<WatchMachinesResponse>(world.machines(b).watchMachines({}, as(user)));
    await onA.count(2, "snapshot and ready on A");
    await onB.count(2, "snapshot and ready on B");
    const link = await openLink(world.links(a), token);
    const linked = (c: Collector<WatchMachinesResponse>) => c.items.map(show).some((e) => e.startsWith("+m1@"));
    // Heartbeats are a minute apart and A never polls: only the local loopback can deliver this.
    await eventually(() => linked(onA), "+m1 on A (same replica)", 2_000);
    // B hears nothing from A over the bus: its feed drains the database every second meanwhile.
    await eventually(() => linked(onB), "+m1 on B (other replica)", 5_000);
    expect(onA.items.map(show).slice(2)).toEqual([expect.stringMatching(/^\+m1@\d+$/)]);
    link.call.end();
    await link.responses.finished;
  });
});
