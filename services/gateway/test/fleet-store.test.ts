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
