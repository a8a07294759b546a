import { status } from "@grpc/grpc-js";
import type { WatchMachinesResponse } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import type { Principal } from "@unimatrix/service-kit/auth";
import { asBearer as bearer } from "@unimatrix/service-kit/testing";
import type { PresenceService } from "../src";
import { as, Collector, eventually, newTenant, World } from "./helpers";

// Two replicas on one schema and one Redis: the cap of 10 watch streams per credential is fleet-wide.
const world = new World("presence_fleet_caps");
let a: PresenceService;
let b: PresenceService;
beforeAll(async () => {
  a = await world.start();
  b = await world.start();
});
afterAll(() => world.close());

type Options = ReturnType<typeof as> | ReturnType<typeof bearer>;
/** A watch stream with a way to close it from the client side. */
function open(replica: PresenceService, options: Options) {
  const controller = new AbortController();
  const collector = new Collector<WatchMachinesResponse>(
    world.machines(replica).watchMachines({}, { ...options, signal: controller.signal }),
  );
  return { collector, close: () => controller.abort() };
}
const isReady = (c: Collector<WatchMachinesResponse>) => c.items.some((e) => e.event.case === "machineReady");
async function ready(c: Collector<WatchMachinesResponse>) {
  await eventually(() => isReady(c) || c.done, "ready or end");
  if (!isReady(c)) throw new Error(`refused: ${c.error?.code} ${c.error?.details}`);
}
async function refused(c: Collector<WatchMachinesResponse>) {
  await c.ended();
  expect(c.items).toEqual([]);
  expect(c.error?.code).toBe(status.RESOURCE_EXHAUSTED);
}

test("10 streams of one credential spread over two replicas; the 11th is refused on either; closing one frees a place", async () => {
  const { user, tenantId } = newTenant();
  const { machine, token } = await world.machines(a).registerMachine({ name: "watcher" }, as(user));
  // One credential, two ways in: its bearer token straight, and the gateway-signed principal.
  const signed: Principal = { kind: "machine", subjectId: machine?.id as string, tenantId };
  const streams = [
    ...Array.from({ length: 5 }, () => open(a, bearer(token))),
    ...Array.from({ length: 5 }, () => open(b, as(signed))),
  ];
  for (const s of streams) await ready(s.collector);

  await refused(open(a, bearer(token)).collector);
  await refused(open(b, as(signed)).collector);
  await refused(open(b, bearer(token)).collector);
  // Another credential of the same tenant is not affected.
  const other = open(b, as(user));
  await ready(other.collector);

  streams[0]?.close();
  await streams[0]?.collector.ended();
  await eventually(async () => {
    const retry = open(b, as(signed));
    await eventually(() => isReady(retry.collector) || retry.collector.done, "an answer");
    if (!isReady(retry.collector)) return false;
    streams.push(retry);
    return true;
  }, "the freed place, taken on the other replica");
  for (const s of [...streams, other]) s.close();
});
