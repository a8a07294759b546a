import { eventually } from "@unimatrix/service-kit/testing";
import { appendMany, orderedEntryIds, privateRedis, streamWorld, subscribe } from "./fixtures/stream-reader";
import { type Harness, newCube, post, type Replica, seat } from "./harness";

let h: Harness;
let b: Replica;
let user: string;
let owner: { id: string; token: string };
beforeAll(async () => {
  ({ h, b, user, owner } = await streamWorld("cube_stream_replicas"));
});
afterAll(async () => {
  await h.close();
});

const orderedIds = (cubeId: string) => orderedEntryIds(h, cubeId);

describe("SubscribeActivity across replicas", () => {
  it("a subscriber on B receives 1,000 entries appended on A, in order, exactly once; resumes with no gap", async () => {
    const { cubeId } = await newCube(h, owner.token, "thousand");
    const writer = await seat(h, owner.token, cubeId);
    const first = subscribe(b, user, cubeId);
    await eventually(() => first.events.some((e) => e.event.case === "ready"), "ready");
    const appending = appendMany(h, writer.token, cubeId, 1_000);
    await eventually(() => first.entryIds().length >= 400, "400 entries on B", 100_000);
    first.cancel();
    await first.done;
    const got = first.entryIds();
    const lastEntry = [...first.events].reverse().find((e) => e.event.case === "entry");
    const cursor = lastEntry?.event.case === "entry" ? lastEntry.event.value.cursor : "";
    const second = subscribe(b, user, cubeId, cursor);
    await appending;
    await eventually(() => got.length + second.entryIds().length >= 1_000, "all 1,000 entries", 100_000);
    second.cancel();
    await second.done;
    const all = [...got, ...second.entryIds()];
    expect(all.length).toBe(1_000);
    expect(all).toEqual(await orderedIds(cubeId));
  }, 240_000);

  it("nothing is lost while Redis is down: streams heal from the database", async () => {
    const redis = await privateRedis();
    try {
      const x = await h.replica({ redisUrl: redis.url });
      const y = await h.replica({ redisUrl: redis.url });
      const { cubeId } = await newCube(x, owner.token, "redis-down");
      const writer = await seat(x, owner.token, cubeId);
      const reader = subscribe(y, user, cubeId);
      await eventually(() => reader.events.some((e) => e.event.case === "ready"), "ready");
      await appendMany(x, writer.token, cubeId, 50);
      await eventually(() => reader.entryIds().length === 50, "50 entries with redis up", 10_000);
      await redis.stop();
      await appendMany(x, writer.token, cubeId, 50);
      await eventually(() => reader.entryIds().length === 100, "100 entries with redis down", 10_000);
      await redis.start();
      await appendMany(x, writer.token, cubeId, 50);
      await eventually(() => reader.entryIds().length === 150, "150 entries after redis is back", 10_000);
      expect(reader.entryIds()).toEqual(await orderedIds(cubeId));
      reader.cancel();
      await reader.done;
    } finally {
      await redis.stop();
    }
  });
});

describe("SubscribeActivity shutdown", () => {
  it("a stopping replica ends its streams with going_away and the last cursor", async () => {
    const doomed = await h.replica();
    const { cubeId } = await newCube(h, owner.token, "shutdown");
    const w = await seat(h, owner.token, cubeId);
    const e = await post(h, w.token, cubeId, "before");
    const s = subscribe(doomed, user, cubeId, "");
    await eventually(() => s.entryIds().length === 1, "replayed entry");
    await doomed.stop();
    await s.done;
    const last = s.events[s.events.length - 1];
    expect(last?.event.case).toBe("goingAway");
    expect(last?.event.case === "goingAway" && last.event.value.cursor).toBe(e.cursor);
  });
});
