import { spawn } from "node:child_process";
import * as net from "node:net";
import { type Bus, busStats, InProcessBus, openBus, RedisBus } from "@unimatrix/service-kit/bus";
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

/** A TCP port nothing listens on (yet): bound once to learn a free number, then released. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Forwards `port` to the test Redis once started, so a test decides when Redis "comes up". */
function redisProxy(port: number) {
  const target = new URL(TEST_REDIS_URL);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    start: () => new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve)),
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe("redis bus through a Redis restart behind a proxy that keeps accepting", () => {
  it("never holds a publish (each settles within the command timeout) and subscribes again on the fresh server", async () => {
    // A redis-server of the test's own (no persistence; the shared one is never restarted) behind a
    // proxy that accepts every connection and drops it when Redis is gone, as a mesh sidecar does.
    const redisPort = await freePort();
    const start = () =>
      spawn("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
        stdio: "ignore",
      });
    let server = start();
    const proxy = net.createServer((client) => {
      const upstream = net.connect(redisPort, "127.0.0.1");
      const drop = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("error", drop).on("close", drop);
      upstream.on("error", drop).on("close", drop);
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const url = `redis://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
    const prefix = testBusPrefix("restart");
    const direct = new Redis(redisPort, "127.0.0.1", { retryStrategy: () => 50 });
    direct.on("error", () => {});
    const up = () => eventually(async () => (await direct.ping().catch(() => "")) === "PONG", "redis-server up");
    await up();
    const publisher = new RedisBus({ url, prefix });
    const subscriber = new RedisBus({ url, prefix });
    const pending = new Map<number, number>();
    let slowest = 0;
    let n = 0;
    const timer = setInterval(() => {
      const id = ++n;
      const at = Date.now();
      pending.set(id, at);
      void publisher
        .publish("cube:1", `m${id}`)
        .catch(() => {})
        .finally(() => {
          pending.delete(id);
          slowest = Math.max(slowest, Date.now() - at);
        });
    }, 5);
    try {
      await Promise.all([publisher.ready(), subscriber.ready()]);
      const seen: string[] = [];
      await subscriber.subscribe("cube:1", (m) => seen.push(m));
      await eventually(() => seen.length > 0, "delivery before the restart");
      const gone = new Promise((resolve) => server.once("exit", resolve));
      server.kill("SIGKILL");
      await gone;
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      server = start();
      await up();
      const after = n;
      await eventually(
        () => seen.some((m) => Number(m.slice(1)) > after),
        "delivery through Redis after the restart",
        10_000,
      );
      clearInterval(timer);
      await eventually(() => pending.size === 0, "every publish to settle", 3_000);
      expect(slowest).toBeLessThan(2_000);
    } finally {
      clearInterval(timer);
      direct.disconnect();
      await publisher.close();
      await subscriber.close();
      server.kill("SIGKILL");
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});

describe("redis bus without redis", () => {
  it("opens without Redis, rings its own listeners at once and counts the failed publish", async () => {
    const bus = await openBus({ url: `redis://127.0.0.1:${await freePort()}`, prefix: testBusPrefix("nored") });
    try {
      expect(bus.healthy()).toBe(false);
      const seen: string[] = [];
      await bus.subscribe("cube:1", (m) => seen.push(m));
      await expect(bus.publish("cube:1", "local")).rejects.toThrow();
      await eventually(() => seen.length === 1, "the local delivery");
      expect(seen).toEqual(["local"]);
      expect(busStats(bus)).toEqual({ published: 0, publishFailures: 1, reconnects: 0 });
    } finally {
      await bus.close();
    }
  });

  it("subscribes when Redis comes, tells listeners, and then carries messages between replicas", async () => {
    const proxy = redisProxy(await freePort());
    const prefix = testBusPrefix("late");
    const late = await openBus({ url: proxy.url, prefix });
    const other = new RedisBus({ url: TEST_REDIS_URL, prefix });
    try {
      await other.ready();
      const seen: string[] = [];
      let reconnects = 0;
      late.onReconnect(() => reconnects++);
      await late.subscribe("cube:7", (m) => seen.push(m));
      await other.publish("cube:7", "while-down");
      await proxy.start();
      await eventually(() => late.healthy() && reconnects === 1, "the late bus to connect", 10_000);
      await eventually(async () => {
        await other.publish("cube:7", "after");
        return seen.includes("after");
      }, "delivery from another replica");
      expect(seen).not.toContain("while-down");
      expect(busStats(late).reconnects).toBe(1);
    } finally {
      await late.close();
      await other.close();
      await proxy.stop();
    }
  });

  it("delivers a replica's own publish once with Redis up (loopback, echo skipped)", async () => {
    const prefix = testBusPrefix("echo");
    const a = new RedisBus({ url: TEST_REDIS_URL, prefix });
    const b = new RedisBus({ url: TEST_REDIS_URL, prefix });
    try {
      await Promise.all([a.ready(), b.ready()]);
      const onA: string[] = [];
      const onB: string[] = [];
      await a.subscribe("c", (m) => onA.push(m));
      await b.subscribe("c", (m) => onB.push(m));
      const sent = Array.from({ length: 20 }, (_, i) => `m${i}`);
      for (const m of sent) await a.publish("c", m);
      // Redis relays a's echoes to a before b's marker (a's publishes were acknowledged first).
      await b.publish("c", "marker");
      await eventually(() => onA.includes("marker") && onB.length === 21, "the marker on both");
      expect(onA).toEqual([...sent, "marker"]);
      expect(onB).toEqual([...sent, "marker"]);
      expect(a.stats()).toEqual({ published: 20, publishFailures: 0, reconnects: 0 });
    } finally {
      await a.close();
      await b.close();
    }
  });
});
