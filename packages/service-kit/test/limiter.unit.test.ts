import { status } from "@grpc/grpc-js";
import { LocalStreamCounter, StreamLimiter } from "@unimatrix/service-kit/bus";
import { expectStatus } from "@unimatrix/service-kit/testing";

describe("StreamLimiter", () => {
  it("caps open streams per credential key with RESOURCE_EXHAUSTED; other keys are not affected", async () => {
    const limiter = new StreamLimiter({ max: 2, what: "WatchMachines streams" });
    await limiter.acquire("client:a");
    await limiter.acquire("client:a");
    const refused = await expectStatus(limiter.acquire("client:a"), status.RESOURCE_EXHAUSTED, "at most 2");
    expect(refused.message).toContain("WatchMachines streams");
    await limiter.acquire("client:b");
    expect([await limiter.open("client:a"), await limiter.open("client:b")]).toEqual([2, 1]);
  });

  it("a released slot can be taken again; releasing twice frees one slot only", async () => {
    const limiter = new StreamLimiter({ max: 2 });
    const first = await limiter.acquire("k");
    await limiter.acquire("k");
    first();
    first();
    await new Promise((resolve) => setImmediate(resolve));
    expect(await limiter.open("k")).toBe(1);
    await limiter.acquire("k");
    await expectStatus(limiter.acquire("k"), status.RESOURCE_EXHAUSTED);
  });

  it("limiters sharing one counter share the cap (what a fleet-wide counter gives every replica)", async () => {
    const fleet = new LocalStreamCounter();
    const replicaA = new StreamLimiter({ max: 3, counter: fleet });
    const replicaB = new StreamLimiter({ max: 3, counter: fleet });
    await replicaA.acquire("user:u");
    await replicaB.acquire("user:u");
    await replicaA.acquire("user:u");
    await expectStatus(replicaB.acquire("user:u"), status.RESOURCE_EXHAUSTED);
    expect(await fleet.count("user:u")).toBe(3);
  });
});
