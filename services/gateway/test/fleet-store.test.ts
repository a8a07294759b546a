import { type ChildProcess, spawn } from "node:child_process";
import { connect, createServer, type Server, type Socket } from "node:net";
import { systemClock } from "@unimatrix/service-kit/clock";
import { eventually, TEST_REDIS_URL, testBusPrefix } from "@unimatrix/service-kit/testing";
import { Redis } from "ioredis";
import { SharedValues } from "../src/fleet/kv";
import { LeaseTable } from "../src/fleet/leases";
import { SharedStore } from "../src/fleet/shared";

/** A TCP proxy to the test Redis that the test can cut and restore (on the same port). */
function redisProxy() {
  const target = new URL(TEST_REDIS_URL);
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve) => {
      server = createServer((client) => {
        const upstream = connect(Number(target.port || 6379), target.hostname);
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on("close", () => sockets.delete(socket));
          socket.on("error", () => socket.destroy());
        }
        client.pipe(upstream).pipe(client);
      });
      server.listen(port, "127.0.0.1", () => {
        port = (server!.address() as { port: number }).port;
        resolve();
      });
    });
  return {
    listen,
    url: () => `redis://127.0.0.1:${port}`,
    async cut() {
      const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => (server?.listening ? server.close(() => resolve()) : resolve()));
    },
  };
}

/**
 * A redis-server of the test's own with no persistence, on a free port (the shared Redis is never
 * restarted): `restart()` SIGKILLs it and starts a fresh, empty one on the same port.
 */
async function privateRedis() {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise((resolve) => probe.close(resolve));
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
    });
    const direct = new Redis(port, "127.0.0.1", { lazyConnect: true, retryStrategy: () => 50 });
    await eventually(async () => (await direct.ping().catch(() => "")) === "PONG", "redis-server to answer", 10_000);
    direct.disconnect();
  };
  const kill = async () => {
    const exited = new Promise((resolve) => child?.once("exit", resolve));
    child?.kill("SIGKILL");
    await exited;
  };
  await start();
  const restart = async () => {
    await kill();
    await start();
  };
  return { url: `redis://127.0.0.1:${port}`, restart, stop: kill };
}

describe("gateway: the shared store through a Redis restart (it comes back empty)", () => {
  it("writes back every replica's values (the freshest copy wins) and leases before anything counts on the new server", async () => {
    const redis = await privateRedis();
    const prefix = testBusPrefix("gw_restart");
    const [storeA, storeB] = [0, 1].map(() => new SharedStore({ url: redis.url, prefix })) as [
      SharedStore,
      SharedStore,
    ];
    const direct = new Redis(redis.url, { retryStrategy: () => 100 });
    direct.on("error", () => {});
    try {
      await Promise.all([storeA.settled(), storeB.settled()]);
      const [valuesA, valuesB] = [storeA, storeB].map((s) => new SharedValues(s, "mcp:session", systemClock)) as [
        SharedValues,
        SharedValues,
      ];
      const [leasesA, leasesB] = [storeA, storeB].map((s) => new LeaseTable(s, "streams", systemClock)) as [
        LeaseTable,
        LeaseTable,
      ];
      // A session opened on A, changed on B (A's copy is older), one only A knows, one deleted.
      await valuesA.set("s1", "opened", 60_000);
      expect(await valuesB.get("s1")).toBe("opened");
      await new Promise((resolve) => setTimeout(resolve, 5));
      await valuesB.set("s1", "seat attached", 60_000);
      await valuesA.set("s2", "only on A", 60_000);
      await valuesA.set("s3", "closed", 60_000);
      await valuesA.delete("s3");
      expect(await leasesA.acquire("cred", "a1", 3, 60_000)).toBe(true);
      expect(await leasesB.acquire("cred", "b1", 3, 60_000)).toBe(true);
      expect(await leasesB.acquire("cred", "b2", 3, 60_000)).toBe(true);

      await redis.restart();
      await eventually(async () => (await direct.dbsize().catch(() => -1)) > 0, "a replica to write back", 10_000);
      await eventually(() => !storeA.degraded && !storeB.degraded, "both stores to reconnect", 10_000);
      // Each store answers only once it has written back what it knows. B's write-back may still
      // be in flight when A's has landed (B reconnects later), so B is asked first: after its
      // answer both copies are in, and the fresher one (B's) must have won on either side.
      expect(await valuesB.get("s1")).toBe("seat attached");
      expect(await valuesA.get("s1")).toBe("seat attached");
      expect(await valuesB.get("s2")).toBe("only on A");
      expect(await valuesA.get("s3")).toBeUndefined();
      expect(await leasesA.count("cred")).toBe(3);
      expect(await leasesB.acquire("cred", "b3", 3, 60_000)).toBe(false);
      // An ordinary write after the write-back is never overwritten by a later one.
      await valuesA.set("s1", "detached", 60_000);
      expect(await valuesB.get("s1")).toBe("detached");
      expect(await direct.exists(`${prefix}:gw:mcp:session:s1#written-back`)).toBe(0);
    } finally {
      direct.disconnect();
      await storeA.close();
      await storeB.close();
      await redis.stop();
    }
  });
});

describe("gateway: the shared store through a Redis outage", () => {
  it("keeps serving what it wrote or read from this replica's memory while Redis is cut, and tells Redis what it wrote once it is back", async () => {
    const proxy = redisProxy();
    await proxy.listen();
    const prefix = testBusPrefix("gw_store");
    const changes: boolean[] = [];
    const store = new SharedStore({ url: proxy.url(), prefix, onDegraded: (degraded) => changes.push(degraded) });
    const direct = new Redis(TEST_REDIS_URL);
    try {
      await store.settled();
      expect(store.degraded).toBe(false);
      const values = new SharedValues(store, "mcp:session", systemClock);
      const leases = new LeaseTable(store, "streams", systemClock);
      await values.set("before", "written while up", 60_000);
      expect(await direct.get(`${prefix}:gw:mcp:session:before`)).toBe("written while up");
      // Written by another replica (straight into Redis) and read here once before the cut.
      await direct.set(`${prefix}:gw:mcp:session:elsewhere`, "moved here", "PX", 60_000);
      await direct.set(`${prefix}:gw:mcp:session:gone`, "deleted elsewhere", "PX", 60_000);
      expect(await values.get("elsewhere")).toBe("moved here");
      expect(await values.get("gone")).toBe("deleted elsewhere");
      await direct.del(`${prefix}:gw:mcp:session:gone`);
      expect(await values.get("gone")).toBeUndefined(); // Redis wins while it is up
      expect(await leases.acquire("cred", "s1", 2, 60_000)).toBe(true);

      await proxy.cut();
      await eventually(() => store.degraded, "the store to notice the cut");
      expect(await values.get("before")).toBe("written while up"); // from memory
      expect(await values.get("elsewhere")).toBe("moved here"); // read before the cut, kept
      expect(await values.get("gone")).toBeUndefined(); // deleted elsewhere stays deleted
      await values.set("during", "written while cut", 60_000);
      expect(await values.get("during")).toBe("written while cut");
      // The cap still holds, counting this replica's own members.
      expect(await leases.acquire("cred", "s2", 2, 60_000)).toBe(true);
      expect(await leases.acquire("cred", "s3", 2, 60_000)).toBe(false);
      expect(await direct.get(`${prefix}:gw:mcp:session:during`)).toBeNull();

      await proxy.listen(); // Redis is back on the same address
      await eventually(() => !store.degraded, "the store to reconnect", 10_000);
      expect(await values.get("during")).toBe("written while cut");
      expect(await direct.get(`${prefix}:gw:mcp:session:during`)).toBe("written while cut");
      expect(changes).toEqual([true, false]);
    } finally {
      direct.disconnect();
      await store.close();
      await proxy.close();
    }
  });
});
