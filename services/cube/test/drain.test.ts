import { spawn } from "node:child_process";
import { join } from "node:path";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import {
  ActivityService,
  type SubscribeActivityResponse,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { asBearer, eventually, testConfig } from "@unimatrix/service-kit/testing";
import { startCube } from "../src/service";
import { type Harness, newClient, newCube, newTenant, OPERATOR_TOKEN, post, seat, startHarness } from "./harness";

const DRAIN_MS = 1_500;
const SIGTERM_DRAIN_MS = 3_000;
let h: Harness;
beforeAll(async () => {
  h = await startHarness("cube_drain", { cube: { heartbeatMs: 60_000 } });
});
afterAll(() => h.close());

/** Reads a stream into `events` until it ends. */
function read(stream: AsyncIterable<SubscribeActivityResponse>) {
  const events: SubscribeActivityResponse[] = [];
  const done = (async () => {
    for await (const event of stream) events.push(event);
  })();
  const entries = () => events.flatMap((e) => (e.event.case === "entry" ? [e.event.value.message] : []));
  return { events, entries, done };
}

test("stop() (what SIGTERM runs): NOT_SERVING through the drain delay, then going_away; resuming elsewhere has no gap and no duplicate", async () => {
  // A replica with a drain delay, on the suite's schema and bus.
  const doomed = await startCube({
    config: testConfig({ busPrefix: h.busPrefix, operatorToken: OPERATOR_TOKEN, drainDelayMs: DRAIN_MS }),
    port: 0,
    schema: h.schema,
    cube: { livenessIntervalMs: 0, heartbeatMs: 60_000 },
  });
  const address = `127.0.0.1:${doomed.port}`;
  const health = createClient(Health, address);
  const activity = createClient(ActivityService, address);
  try {
    const t = await newTenant(h, "drain");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId } = await newCube(h, owner.token, "drain");
    const w = await seat(h, owner.token, cubeId);
    await post(h, w.token, cubeId, "e1");
    const first = read(activity.subscribeActivity({ cubeId, after: "" }, asBearer(t.userToken)));
    await eventually(() => first.entries().length === 1, "the backlog");

    const stopped = doomed.stop();
    // During the drain delay: health says NOT_SERVING, and the replica still serves its streams.
    await eventually(
      async () => (await health.check({ service: "" })).status === HealthCheckResponse_ServingStatus.NOT_SERVING,
      "NOT_SERVING",
    );
    await post(h, w.token, cubeId, "e2");
    await eventually(() => first.entries().includes("e2"), "an entry delivered while draining");
    expect(first.events.some((e) => e.event.case === "goingAway")).toBe(false);
    expect((await health.check({ service: "unimatrix.cube.v1.ActivityService" })).status).toBe(
      HealthCheckResponse_ServingStatus.NOT_SERVING,
    );

    await first.done;
    await stopped;
    const last = first.events.at(-1);
    expect(last?.event.case).toBe("goingAway");
    const cursor = last?.event.case === "goingAway" ? last.event.value.cursor : "";
    expect(cursor).not.toBe("");

    // Entries committed after the going-away; the client resumes on another replica from the cursor.
    await post(h, w.token, cubeId, "e3");
    const resumed = read(h.activity.subscribeActivity({ cubeId, after: cursor }, asBearer(t.userToken)));
    await post(h, w.token, cubeId, "e4");
    await eventually(() => resumed.entries().includes("e4"), "the resumed stream to be live");
    expect([...first.entries(), ...resumed.entries()]).toEqual(["e1", "e2", "e3", "e4"]);
  } finally {
    health.close();
    activity.close();
    await doomed.stop();
  }
});

test("SIGTERM to a replica process: NOT_SERVING for the drain delay, going_away on its stream, exit 0", async () => {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(__dirname, "fixtures/sigterm-cube.ts"), h.schema, h.busPrefix, String(SIGTERM_DRAIN_MS)],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = "";
      child.stdout?.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const match = /port (\d+)/.exec(out);
        if (match) resolve(Number(match[1]));
      });
      void exited.then((code) => reject(new Error(`replica exited ${code} before it was up`)));
    });
    const health = createClient(Health, `127.0.0.1:${port}`);
    const activity = createClient(ActivityService, `127.0.0.1:${port}`);
    try {
      const t = await newTenant(h, "sigterm");
      const owner = await newClient(h, t.userToken, "owner");
      const { cubeId } = await newCube(h, owner.token, "sigterm");
      const stream = read(activity.subscribeActivity({ cubeId }, asBearer(t.userToken)));
      await eventually(() => stream.events.some((e) => e.event.case === "ready"), "ready");
      expect((await health.check({ service: "" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
      const signalled = Date.now();
      child.kill("SIGTERM");
      await eventually(
        async () => (await health.check({ service: "" })).status === HealthCheckResponse_ServingStatus.NOT_SERVING,
        "NOT_SERVING after SIGTERM",
      );
      // Still draining (3 s), still serving: the stream has not been told to go yet.
      expect(stream.events.some((e) => e.event.case === "goingAway")).toBe(false);
      await stream.done;
      expect(stream.events.at(-1)?.event.case).toBe("goingAway");
      expect(Date.now() - signalled).toBeGreaterThanOrEqual(SIGTERM_DRAIN_MS);
      expect(await exited).toBe(0);
    } finally {
      health.close();
      activity.close();
    }
  } finally {
    child.kill("SIGKILL");
  }
}, 60_000);
