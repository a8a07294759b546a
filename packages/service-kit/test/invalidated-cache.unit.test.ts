import { type Bus, InProcessBus, InvalidatedCache, publishInvalidation } from "@unimatrix/service-kit/bus";
import { silentLogger } from "@unimatrix/service-kit/logger";

/** An in-process bus whose health and reconnects the test decides. */
class SwitchedBus implements Bus {
  up = true;
  readonly #inner = new InProcessBus();
  readonly #reconnects = new Set<() => void>();
  publish(channel: string, message: string) {
    return this.#inner.publish(channel, message);
  }
  subscribe(channel: string, listener: (message: string) => void) {
    return this.#inner.subscribe(channel, listener);
  }
  healthy(): boolean {
    return this.up;
  }
  onReconnect(listener: () => void): () => void {
    this.#reconnects.add(listener);
    return () => this.#reconnects.delete(listener);
  }
  reconnect(): void {
    this.up = true;
    for (const listener of this.#reconnects) listener();
  }
  close() {
    return this.#inner.close();
  }
}

const logger = silentLogger();
let now = 1_000_000;
const clock = () => now;
const tick = () => new Promise((resolve) => setImmediate(resolve));

async function open(bus: Bus, maxEntries = 100) {
  const cache = new InvalidatedCache<string>({
    bus,
    channel: "test-auth",
    maxAgeMs: 60_000,
    downMaxAgeMs: 5_000,
    maxEntries,
    now: clock,
  });
  await cache.open();
  return cache;
}

/** A loader that counts its calls and answers `value` tagged `tags`. */
function loader(value: string | null, tags: string[] = [], expiresAt?: number) {
  const calls = { n: 0 };
  const load = async () => {
    calls.n += 1;
    return value === null ? null : { value, tags, ...(expiresAt !== undefined ? { expiresAt } : {}) };
  };
  return { calls, load };
}

describe("InvalidatedCache", () => {
  test("reads through once, then serves from memory; refusals are never kept", async () => {
    const cache = await open(new SwitchedBus());
    const found = loader("alice", ["client:1"]);
    expect(await cache.through("k", found.load)).toBe("alice");
    expect(await cache.through("k", found.load)).toBe("alice");
    expect(found.calls.n).toBe(1);
    const refused = loader(null);
    expect(await cache.through("x", refused.load)).toBeNull();
    expect(await cache.through("x", refused.load)).toBeNull();
    expect(refused.calls.n).toBe(2);
    expect(cache.stats()).toMatchObject({ entries: 1, hits: 1, misses: 3 });
  });

  test("an invalidation published on one replica drops the tagged entries on every replica, the publisher's at once", async () => {
    const bus = new SwitchedBus();
    const mine = await open(bus);
    const other = await open(bus);
    for (const cache of [mine, other]) {
      await cache.through("a", loader("a", ["client:1", "cube:9"]).load);
      await cache.through("b", loader("b", ["client:2"]).load);
    }
    const sent = publishInvalidation(bus, "test-auth", ["client:1"], logger, [mine]);
    // The publisher's own cache dropped before the publish resolved.
    expect(mine.get("a")).toBeUndefined();
    await sent;
    await tick();
    expect(other.get("a")).toBeUndefined();
    expect(other.get("b")).toBe("b");
    expect(mine.get("b")).toBe("b");
  });

  test("entries live maxAgeMs with the bus up, downMaxAgeMs while it is down, and none survive a reconnect", async () => {
    const bus = new SwitchedBus();
    const cache = await open(bus);
    await cache.through("k", loader("v").load);
    now += 10_000;
    expect(cache.get("k")).toBe("v"); // 10 s old, bus up: still trusted
    bus.up = false;
    expect(cache.get("k")).toBeUndefined(); // 10 s old, bus down: past the 5 s bound
    await cache.through("k", loader("v2").load);
    now += 4_000;
    expect(cache.get("k")).toBe("v2");
    now += 1_001;
    expect(cache.get("k")).toBeUndefined();
    await cache.through("k", loader("v3").load);
    bus.reconnect();
    expect(cache.get("k")).toBeUndefined();
    await cache.through("k", loader("v4").load);
    now += 59_000;
    expect(cache.get("k")).toBe("v4");
    now += 1_001;
    expect(cache.get("k")).toBeUndefined();
  });

  test("an entry with an expiry is not served at or after it", async () => {
    const cache = await open(new SwitchedBus());
    await cache.through("s", loader("session", [], now + 1_000).load);
    now += 999;
    expect(cache.get("s")).toBe("session");
    now += 1;
    expect(cache.get("s")).toBeUndefined();
  });

  test("a load that raced an invalidation is returned but not kept", async () => {
    const cache = await open(new SwitchedBus());
    let release: () => void = () => {};
    const slow = cache.through("k", async () => {
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return { value: "read before the revocation", tags: ["client:1"] };
    });
    await tick();
    cache.invalidate(["client:1"]);
    release();
    expect(await slow).toBe("read before the revocation");
    expect(cache.get("k")).toBeUndefined();
  });

  test("past maxEntries the oldest entries go, and their tags with them", async () => {
    const cache = await open(new SwitchedBus(), 2);
    await cache.through("a", loader("a", ["t:a"]).load);
    await cache.through("b", loader("b", ["t:b"]).load);
    await cache.through("c", loader("c", ["t:c"]).load);
    expect(cache.get("a")).toBeUndefined();
    expect(cache.get("b")).toBe("b");
    expect(cache.get("c")).toBe("c");
    cache.invalidate(["t:a"]);
    expect(cache.stats().entries).toBe(2);
    cache.invalidate(["t:b", "t:c"]);
    expect(cache.stats().entries).toBe(0);
  });
});
