import { type Bus, InProcessBus, RedisBus } from "@unimatrix/service-kit";
import { eventually, TEST_REDIS_URL, testBusPrefix } from "@unimatrix/service-kit/testing";
import { Redis } from "ioredis";

/** A publisher and a subscriber side; for Redis they are separate buses with their own connections. */
interface Pair {
  readonly publisher: Bus;
  readonly subscriber: Bus;
  readonly other?: Bus;
  close(): Promise<void>;
}

const implementations: [string, () => Promise<Pair>][] = [
  [
    "in-process",
    async () => {
      const bus = new InProcessBus();
      return { publisher: bus, subscriber: bus, close: () => bus.close() };
    },
  ],
  [
    "redis",
    async () => {
      const prefix = testBusPrefix("bus");
      const publisher = new RedisBus({ url: TEST_REDIS_URL, prefix });
      const subscriber = new RedisBus({ url: TEST_REDIS_URL, prefix });
      const other = new RedisBus({ url: TEST_REDIS_URL, prefix: `${prefix}-other` });
      await Promise.all([publisher.ready(), subscriber.ready(), other.ready()]);
      return {
        publisher,
        subscriber,
        other,
        close: async () => {
          await Promise.all([publisher.close(), subscriber.close(), other.close()]);
        },
      };
    },
  ],
];

describe.each(implementations)("%s bus", (_name, open) => {
  let pair: Pair;
  beforeEach(async () => {
    pair = await open();
  });
  afterEach(async () => {
    await pair.close();
  });

  it("delivers every message of a channel, in publish order, to every listener", async () => {
    const a: string[] = [];
    const b: string[] = [];
    await pair.subscriber.subscribe("cube:1", (m) => a.push(m));
    await pair.subscriber.subscribe("cube:1", (m) => b.push(m));
    const sent = Array.from({ length: 50 }, (_, i) => `m${i}`);
    for (const message of sent) await pair.publisher.publish("cube:1", message);
    await eventually(() => a.length === 50 && b.length === 50, "50 messages on both listeners");
    expect(a).toEqual(sent);
    expect(b).toEqual(sent);
  });

  it("keeps channels apart and stops delivering after unsubscribe", async () => {
    const one: string[] = [];
    const two: string[] = [];
    const subOne = await pair.subscriber.subscribe("cube:1", (m) => one.push(m));
    await pair.subscriber.subscribe("cube:2", (m) => two.push(m));
    await pair.publisher.publish("cube:1", "to-one");
    await pair.publisher.publish("cube:2", "to-two");
    await eventually(() => one.length === 1 && two.length === 1, "one message per channel");
    await subOne.unsubscribe();
    await pair.publisher.publish("cube:1", "after-unsubscribe");
    await pair.publisher.publish("cube:2", "marker");
    await eventually(() => two.length === 2, "the marker on channel 2");
    expect(one).toEqual(["to-one"]);
    expect(two).toEqual(["to-two", "marker"]);
  });

  it("does not run a listener inside publish", async () => {
    let delivered = false;
    await pair.subscriber.subscribe("c", () => {
      delivered = true;
    });
    const publishing = pair.publisher.publish("c", "x");
    const synchronous = delivered;
    await publishing;
    await eventually(() => delivered, "delivery");
    expect(synchronous).toBe(false);
  });

  it("isolates installations by prefix", async () => {
    if (!pair.other) return; // one process, one bus: nothing to isolate
    const seen: string[] = [];
    await pair.subscriber.subscribe("shared", (m) => seen.push(`own:${m}`));
    await pair.other.subscribe("shared", (m) => seen.push(`other:${m}`));
    await pair.publisher.publish("shared", "x");
    await pair.other.publish("shared", "y");
    await eventually(() => seen.length === 2, "both messages");
    expect(seen.sort()).toEqual(["other:y", "own:x"]);
  });
});

describe("redis bus reconnect", () => {
  it("tells listeners it reconnected and keeps delivering on the same subscriptions", async () => {
    const prefix = testBusPrefix("reconnect");
    const publisher = new RedisBus({ url: TEST_REDIS_URL, prefix });
    const subscriber = new RedisBus({ url: TEST_REDIS_URL, prefix });
    const admin = new Redis(TEST_REDIS_URL);
    try {
      await Promise.all([publisher.ready(), subscriber.ready()]);
      const seen: string[] = [];
      let reconnects = 0;
      subscriber.onReconnect(() => reconnects++);
      await subscriber.subscribe("cube:9", (m) => seen.push(m));
      const clients = (await admin.client("LIST")) as string;
      // Both buses have a subscriber connection; the one holding a subscription is `subscriber`'s.
      const line = clients.split("\n").find((l) => l.includes(`name=${prefix}-sub`) && / sub=1 /.test(l));
      const id = /id=(\d+)/.exec(line ?? "")?.[1];
      expect(id).toBeDefined();
      await admin.client("KILL", "ID", id!);
      await eventually(() => reconnects === 1 && subscriber.healthy(), "the subscriber to reconnect");
      await eventually(async () => {
        await publisher.publish("cube:9", "after");
        return seen.includes("after");
      }, "delivery after reconnect");
    } finally {
      admin.disconnect();
      await publisher.close();
      await subscriber.close();
    }
  });

  it("fails a publish at once while Redis is unreachable instead of queueing it", async () => {
    const bus = new RedisBus({ url: "redis://127.0.0.1:1", prefix: testBusPrefix("down") });
    try {
      await expect(bus.publish("c", "x")).rejects.toThrow();
      expect(bus.healthy()).toBe(false);
    } finally {
      await bus.close();
    }
  });
});
