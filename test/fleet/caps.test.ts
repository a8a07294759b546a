import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { Fleet, type Targets } from "./harness/fleet";
import { activityClient, bearer, ROUND_ROBIN } from "./harness/grpc";
import { poll } from "./harness/processes";
import { seedWorld, type World } from "./harness/world";

/**
 * "At most 10 open streams per credential" counts across the fleet: streams of
 * one credential spread over both gateways (and so over both replicas behind them), over SSE and gRPC
 * alike, are refused from the eleventh on. Today each replica counts alone. [fleet-gw]: the gateways
 * count SSE streams in Redis; [fleet-svc]: the services count their streams fleet-wide with one
 * definition of "credential" for a bearer token and the gateway-signed principal of that token.
 */
const targets = (process.env.FLEET_TARGETS as Targets | undefined) ?? "balanced";
const LIMIT = 10;

/** An open SSE stream (200 and the first `ready` seen), or the refusal. */
interface Opened {
  readonly status: number;
  readonly body: string;
  close(): void;
}

/** Opens an SSE stream with fetch and waits until it is live (`ready`) or refused. */
async function openSse(url: string, token: string, ready: string): Promise<Opened> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
  if (response.status !== 200) return { status: response.status, body: await response.text(), close: () => {} };
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes(`event: ${ready}`)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stream ended before ${ready}: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  return { status: 200, body: text, close: () => controller.abort() };
}

/** Waits for a gRPC server stream's first message (open) or its error (refused: the code). */
function firstOf(stream: AsyncIterable<unknown> & { cancel(): void }): Promise<{ code: number; close(): void }> {
  return (async () => {
    const iterator = stream[Symbol.asyncIterator]();
    try {
      await iterator.next();
      return { code: 0, close: () => stream.cancel() };
    } catch (error) {
      return { code: (error as { code: number }).code, close: () => {} };
    }
  })();
}

describe(`fleet: stream caps per credential across replicas (${targets} targets)`, () => {
  let fleet: Fleet;
  let world: World;
  let gateways: string[];
  const open: { close(): void }[] = [];

  beforeAll(async () => {
    fleet = await Fleet.start({ label: "caps", targets });
    world = await seedWorld(fleet.gatewayUrls()[0]!, 3, 0);
    gateways = fleet.gatewayUrls();
    // One entry, so a cube stream has something before its `ready`.
    const activity = activityClient(Fleet.target(fleet.cube));
    await activity.appendEntry(
      { cubeId: world.cubeId, message: "hello", visibility: Visibility.BROADCAST },
      bearer(world.clients[0]!.token, { deadline: 10_000 }),
    );
    activity.close();
  }, 120_000);

  afterEach(() => {
    for (const stream of open.splice(0)) stream.close();
  });

  afterAll(async () => {
    await fleet?.stop();
  }, 60_000);

  it("[fleet-gw] eleven SSE activity streams of one credential over two gateways: the eleventh is refused with 429", async () => {
    const token = world.clients[0]!.token;
    const url = (i: number) => `${gateways[i % 2]}/v1/cubes/${world.cubeId}/events?after=`;
    for (let i = 0; i < LIMIT; i++) {
      const stream = await openSse(url(i), token, "ready");
      open.push(stream);
      expect({ stream: i + 1, status: stream.status }).toEqual({ stream: i + 1, status: 200 });
    }
    for (const gateway of [0, 1]) {
      const eleventh = await openSse(url(gateway), token, "ready");
      open.push(eleventh);
      expect({ gateway, status: eleventh.status }).toEqual({ gateway, status: 429 });
      expect(JSON.parse(eleventh.body)).toMatchObject({ code: "resource_exhausted" });
    }
    // Closing one frees its place for the credential, wherever the next stream lands.
    open.shift()!.close();
    await poll(
      async () => {
        const again = await openSse(url(1), token, "ready");
        open.push(again);
        return again.status === 200;
      },
      "a freed place to be usable on the other gateway",
      15_000,
      250,
    );
  });

  it("[fleet-svc] one credential's SubscribeActivity streams count the same over gRPC and SSE: the eleventh is refused either way", async () => {
    const token = world.clients[1]!.token;
    const activity = activityClient(Fleet.target(fleet.cube));
    try {
      for (let i = 0; i < LIMIT / 2; i++) {
        const sse = await openSse(`${gateways[i % 2]}/v1/cubes/${world.cubeId}/events?after=`, token, "ready");
        open.push(sse);
        expect(sse.status).toBe(200);
        const grpc = await firstOf(activity.subscribeActivity({ cubeId: world.cubeId, after: "" }, bearer(token)));
        open.push(grpc);
        expect(grpc.code).toBe(0);
      }
      const overSse = await openSse(`${gateways[0]}/v1/cubes/${world.cubeId}/events?after=`, token, "ready");
      open.push(overSse);
      expect(overSse.status).toBe(429);
      const overGrpc = await firstOf(activity.subscribeActivity({ cubeId: world.cubeId, after: "" }, bearer(token)));
      open.push(overGrpc);
      expect(overGrpc.code).toBe(8); // RESOURCE_EXHAUSTED
    } finally {
      for (const stream of open.splice(0)) stream.close();
      activity.close();
    }
  });

  it("[fleet-svc] one credential's WatchMachines streams count the same over gRPC (both replicas) and SSE (both gateways)", async () => {
    const token = world.clients[2]!.token;
    const machines = createClient(MachineService, Fleet.target(fleet.presence), undefined, ROUND_ROBIN);
    try {
      for (let i = 0; i < LIMIT / 2; i++) {
        const sse = await openSse(`${gateways[i % 2]}/v1/machines/events`, token, "machine_ready");
        open.push(sse);
        expect(sse.status).toBe(200);
        const grpc = await firstOf(machines.watchMachines({ after: "" }, bearer(token)));
        open.push(grpc);
        expect(grpc.code).toBe(0);
      }
      for (const gateway of [0, 1]) {
        const overSse = await openSse(`${gateways[gateway]}/v1/machines/events`, token, "machine_ready");
        open.push(overSse);
        expect({ gateway, status: overSse.status }).toEqual({ gateway, status: 429 });
      }
      const overGrpc = await firstOf(machines.watchMachines({ after: "" }, bearer(token)));
      open.push(overGrpc);
      expect(overGrpc.code).toBe(8); // RESOURCE_EXHAUSTED
    } finally {
      for (const stream of open.splice(0)) stream.close();
      machines.close();
    }
  });

  it("[fleet-svc] a killed replica's streams free their places within seconds", async () => {
    const token = world.clients[2]!.token;
    const [first, second] = fleet.presence as [(typeof fleet.presence)[0], (typeof fleet.presence)[0]];
    const onFirst = createClient(MachineService, first.address);
    const onSecond = createClient(MachineService, second.address);
    try {
      for (let i = 0; i < LIMIT; i++) {
        const grpc = await firstOf(onFirst.watchMachines({ after: "" }, bearer(token)));
        open.push(grpc);
        expect(grpc.code).toBe(0);
      }
      const eleventh = await firstOf(onSecond.watchMachines({ after: "" }, bearer(token)));
      open.push(eleventh);
      expect(eleventh.code).toBe(8);
      await fleet.kill(first);
      await poll(
        async () => {
          const again = await firstOf(onSecond.watchMachines({ after: "" }, bearer(token)));
          open.push(again);
          return again.code === 0;
        },
        "the dead replica's streams to expire",
        30_000,
        500,
      );
    } finally {
      for (const stream of open.splice(0)) stream.close();
      onFirst.close();
      onSecond.close();
    }
  });
});
