import { spawn } from "node:child_process";
import * as net from "node:net";
import { join } from "node:path";
import { RedisStreamCounter } from "@unimatrix/service-kit/bus";
import { eventually, TEST_REDIS_URL, testBusPrefix } from "@unimatrix/service-kit/testing";
import { Redis } from "ioredis";

const counters: RedisStreamCounter[] = [];
function counter(prefix: string, leaseMs = 10_000, url = TEST_REDIS_URL): RedisStreamCounter {
  const c = new RedisStreamCounter({ url, prefix, name: "test", leaseMs });
  counters.push(c);
  return c;
}
const ready = (c: RedisStreamCounter) => eventually(() => !c.stats().degraded, "redis ready");
afterEach(async () => {
  for (const c of counters.splice(0)) await c.close();
});

describe("fleet-wide stream counter", () => {
  it("holds one cap across replicas, and a released place is free for any replica", async () => {
    const prefix = testBusPrefix("fleetcount");
    const a = counter(prefix);
    const b = counter(prefix);
    await Promise.all([ready(a), ready(b)]);
    expect(await a.tryAdd("user:1", 3)).toBe(true);
    expect(await a.tryAdd("user:1", 3)).toBe(true);
    expect(await b.tryAdd("user:1", 3)).toBe(true);
    expect(await b.tryAdd("user:1", 3)).toBe(false);
    expect(await a.tryAdd("user:1", 3)).toBe(false);
    // Another key is not affected.
    expect(await b.tryAdd("user:2", 3)).toBe(true);
    expect([await a.count("user:1"), await b.count("user:1")]).toEqual([3, 3]);
    await a.remove("user:1");
    expect(await b.count("user:1")).toBe(2);
    expect(await b.tryAdd("user:1", 3)).toBe(true);
    expect(a.stats().localFallbacks + b.stats().localFallbacks).toBe(0);
  });

  it("after Redis restarts empty, a replica writes its places back before it counts anything on the new server", async () => {
    // A redis-server of the test's own, with no persistence, on a free port (the shared one is never restarted).
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const direct = new Redis(port, "127.0.0.1", { retryStrategy: () => 50 });
    direct.on("error", () => {});
    let server = spawn("redis-server", [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
    ]);
    const answering = () => eventually(async () => (await direct.ping().catch(() => "")) === "PONG", "redis-server up");
    try {
      await answering();
      const prefix = testBusPrefix("fleetrestart");
      const a = counter(prefix, 60_000, `redis://127.0.0.1:${port}`);
      await ready(a);
      for (let i = 0; i < 3; i++) expect(await a.tryAdd("user:1", 3)).toBe(true);
      const gone = new Promise((resolve) => server.once("exit", resolve));
      server.kill("SIGKILL");
      await gone;
      await eventually(() => a.stats().degraded, "the counter to notice");
      server = spawn("redis-server", [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
      ]);
      await answering();
      await ready(a);
      // The first decision on the new server already counts the three places it forgot: the renewal
      // on "ready" writes them back ahead of any count (commands keep their order on one connection).
      expect(await a.tryAdd("user:1", 3)).toBe(false);
      expect(await a.count("user:1")).toBe(3);
      await a.remove("user:1");
      expect(await a.tryAdd("user:1", 3)).toBe(true);
    } finally {
      direct.disconnect();
      server.kill("SIGKILL");
    }
  });

  it("frees a killed replica's places once their lease runs out", async () => {
    const prefix = testBusPrefix("fleetdead");
    const survivor = counter(prefix, 1_000);
    await ready(survivor);
    // `node --import tsx`, not the tsx wrapper: SIGKILL must reach the process holding the places.
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(__dirname, "fixtures/hold-streams.ts"), TEST_REDIS_URL, prefix, "user:9", "3", "1000"],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout?.on("data", (chunk: Buffer) => chunk.toString().includes("held") && resolve());
        child.once("exit", (code) => reject(new Error(`fixture exited ${code}`)));
        setTimeout(() => reject(new Error("fixture did not start")), 20_000).unref();
      });
      // The live replica renews: its places outlast the lease they carry now. Shown on the lease's
      // own clock (Redis TIME, which the counter's scripts read), not with a sleep: once Redis's
      // time is past the latest expiry the places had, they only still count if renewed since.
      const redis = new Redis(TEST_REDIS_URL);
      try {
        const key = `${prefix}:test:user:9`;
        // The fixture may have counted locally before its connection was ready; its renewal writes them in.
        await eventually(async () => (await redis.zcard(key)) === 3, "the fixture's places in Redis");
        const scores = await redis.zrange(key, 0, -1, "WITHSCORES");
        const expiry = Math.max(...scores.filter((_, i) => i % 2 === 1).map(Number));
        const redisNow = async () => {
          const [seconds, micros] = await redis.time();
          return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
        };
        await eventually(async () => (await redisNow()) > expiry, "the places' lease to run out on Redis's clock");
      } finally {
        redis.disconnect();
      }
      expect(await survivor.count("user:9")).toBe(3);
      expect(await survivor.tryAdd("user:9", 3)).toBe(false);
    } finally {
      child.kill("SIGKILL");
    }
    const killedAt = Date.now();
    await eventually(async () => (await survivor.count("user:9")) === 0, "the dead replica's places to lapse", 5_000);
    expect(Date.now() - killedAt).toBeLessThan(3_000);
    expect(await survivor.tryAdd("user:9", 3)).toBe(true);
  }, 30_000);

  it("counts this replica's own streams while Redis is down, and says so", async () => {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    await new Promise((resolve) => server.close(resolve));
    const down = counter(testBusPrefix("fleetdown"), 10_000, `redis://127.0.0.1:${port}`);
    expect(await down.tryAdd("user:1", 2)).toBe(true);
    expect(await down.tryAdd("user:1", 2)).toBe(true);
    expect(await down.tryAdd("user:1", 2)).toBe(false);
    await down.remove("user:1");
    expect(await down.count("user:1")).toBe(1);
    expect(await down.tryAdd("user:1", 2)).toBe(true);
    expect(down.stats()).toEqual({ degraded: true, localFallbacks: 6 });
  });
});
