import * as grpc from "@grpc/grpc-js";
import { status } from "@grpc/grpc-js";
import { credentialKey, type Principal } from "@unimatrix/service-kit/auth";
import { DomainError } from "@unimatrix/service-kit/errors";
import { watchStreamLimiter } from "../src/live/watch";
import { rawBearer } from "../src/rules/access";

const tenantId = "00000000-0000-4000-8000-000000000001";
const machine: Principal = { kind: "machine", subjectId: "00000000-0000-4000-8000-000000000002", tenantId };
const user: Principal = { kind: "user", subjectId: "00000000-0000-4000-8000-000000000003", tenantId };

async function codeOf(promise: Promise<unknown>): Promise<number | null> {
  try {
    await promise;
    return null;
  } catch (error) {
    if (error instanceof DomainError) return error.code;
    throw error;
  }
}

describe("the per-credential WatchMachines cap", () => {
  test("the 11th stream of a credential is RESOURCE_EXHAUSTED; a release frees one slot", async () => {
    const limiter = watchStreamLimiter(10);
    const key = credentialKey(machine);
    const releases = await Promise.all(Array.from({ length: 10 }, () => limiter.acquire(key)));
    expect(await limiter.open(key)).toBe(10);
    expect(await codeOf(limiter.acquire(key))).toBe(status.RESOURCE_EXHAUSTED);
    expect(await limiter.open(key)).toBe(10);
    releases[0]?.();
    releases[0]?.(); // a second release of the same slot counts nothing
    await Promise.resolve();
    expect(await limiter.open(key)).toBe(9);
    const again = await limiter.acquire(key);
    expect(await codeOf(limiter.acquire(key))).toBe(status.RESOURCE_EXHAUSTED);
    again();
    for (const release of releases) release();
    await Promise.resolve();
    expect(await limiter.open(key)).toBe(0);
  });

  test("another credential of the same tenant has its own allowance", async () => {
    const limiter = watchStreamLimiter(1);
    await limiter.acquire(credentialKey(machine));
    expect(await codeOf(limiter.acquire(credentialKey(machine)))).toBe(status.RESOURCE_EXHAUSTED);
    expect(await codeOf(limiter.acquire(credentialKey(user)))).toBeNull();
  });

  test("the credential is the principal: the same machine by token or through the gateway counts once", () => {
    expect(credentialKey(machine)).toBe(`machine:${machine.subjectId}`);
    expect(credentialKey({ ...machine })).toBe(credentialKey(machine));
    expect(credentialKey(user)).not.toBe(credentialKey(machine));
  });
});

describe("rawBearer", () => {
  test("a bearer token is re-resolvable; next to a signed principal it is not (the gateway owns that stream)", () => {
    const metadata = new grpc.Metadata();
    metadata.set("authorization", "Bearer umx_user_abc_def");
    expect(rawBearer(metadata)).toBe("umx_user_abc_def");
    metadata.set("x-umx-principal", "signed");
    expect(rawBearer(metadata)).toBeNull();
    expect(rawBearer(new grpc.Metadata())).toBeNull();
  });
});
