import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import type { WatchMachinesResponse } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { testConfig } from "@unimatrix/service-kit/testing";
import { type PresenceService, startPresence } from "../src";
import { as, Collector, eventually, FAST, newTenant, openLink, describe as show, World } from "./helpers";

const DRAIN_MS = 1_500;
const world = new World("presence_drain");
let survivor: PresenceService;
beforeAll(async () => {
  survivor = await world.start();
});
afterAll(() => world.close());

test("stop(): NOT_SERVING through the drain delay, then going_away on watch streams and links; resuming loses nothing", async () => {
  const doomed = await startPresence({
    config: testConfig({ busPrefix: world.busPrefix, drainDelayMs: DRAIN_MS }),
    port: 0,
    schema: world.schema.schema,
    clock: world.clock,
    presence: FAST,
  });
  const health = createClient(Health, `127.0.0.1:${doomed.port}`);
  world.clients.push(health);
  const { user } = newTenant();
  const machines = world.machines(doomed);
  const one = await machines.registerMachine({ name: "one" }, as(user));
  const two = await machines.registerMachine({ name: "two" }, as(user));
  const watch = new Collector<WatchMachinesResponse>(machines.watchMachines({}, as(user)));
  await watch.count(2, "snapshot and ready");
  const link = await openLink(world.links(doomed), one.token);
  await eventually(() => watch.items.map(show).some((e) => e.startsWith("+one@")), "+one");

  const stopped = doomed.stop();
  await eventually(
    async () => (await health.check({ service: "" })).status === HealthCheckResponse_ServingStatus.NOT_SERVING,
    "NOT_SERVING",
  );
  // Still serving while draining: a new link is accepted and its transition reaches the watcher.
  const late = await openLink(world.links(doomed), two.token);
  await eventually(() => watch.items.map(show).some((e) => e.startsWith("+two@")), "+two while draining");
  expect(watch.done || link.responses.done).toBe(false);

  await Promise.all([watch.ended(), link.responses.ended(), late.responses.ended()]);
  await stopped;
  expect(watch.error).toBeNull();
  const last = watch.items.at(-1);
  expect(last?.event.case).toBe("goingAway");
  const cursor = last?.event.case === "goingAway" ? last.event.value.cursor : "";
  const lastTransition = [...watch.items].reverse().find((e) => e.event.case === "machineLinked");
  expect(cursor).toBe(lastTransition?.event.case === "machineLinked" ? lastTransition.event.value.cursor : "?");
  for (const l of [link, late]) expect(l.responses.items.at(-1)?.event.case).toBe("goingAway");

  // The daemons reconnect elsewhere within the lease: no presence flap; the watcher resumes from its cursor.
  const again = await openLink(world.links(survivor), one.token);
  const resumed = new Collector<WatchMachinesResponse>(
    world.machines(survivor).watchMachines({ after: cursor }, as(user)),
  );
  await resumed.count(1, "ready");
  expect(resumed.items.map(show)).toEqual([`ready:${cursor}`]);
  const listed = await world.machines(survivor).listMachines({}, as(user));
  expect(listed.machines.find((m) => m.name === "one")?.linked).toBe(true);
  again.call.end();
  await eventually(() => resumed.items.map(show).some((e) => e.startsWith("-one@")), "-one after the new link ends");
  expect(resumed.items.map(show).filter((e) => e.startsWith("+") || e.startsWith("-"))).toEqual([
    expect.stringMatching(/^-one@\d+$/),
  ]);
});
