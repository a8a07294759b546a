import * as grpc from "@grpc/grpc-js";
import { status } from "@grpc/grpc-js";
import { attachPrincipal, DomainError, issueToken, type Principal } from "@unimatrix/service-kit";
import { StreamLimiter } from "../src/live/limiter";
import { credentialKey } from "../src/rules/access";

const KEY = "test-internal-key-0123456789abcdef0123456789";
const user: Principal = {
  kind: "user",
  subjectId: "00000000-0000-4000-8000-000000000002",
  tenantId: "00000000-0000-4000-8000-000000000001",
};

function codeOf(fn: () => unknown): number | null {
  try {
    fn();
    return null;
  } catch (error) {
    if (error instanceof DomainError) return error.code;
    throw error;
  }
}

describe("StreamLimiter (per-credential stream cap)", () => {
  test("the 11th stream of a credential is RESOURCE_EXHAUSTED; a release frees one slot", () => {
    const limiter = new StreamLimiter(10, "WatchMachines streams");
    const releases = Array.from({ length: 10 }, () => limiter.reserve("a"));
    expect(limiter.openFor("a")).toBe(10);
    expect(codeOf(() => limiter.reserve("a"))).toBe(status.RESOURCE_EXHAUSTED);
    expect(limiter.openFor("a")).toBe(10);
    releases[0]?.();
    expect(limiter.openFor("a")).toBe(9);
    const again = limiter.reserve("a");
    expect(codeOf(() => limiter.reserve("a"))).toBe(status.RESOURCE_EXHAUSTED);
    again();
    for (const release of releases) release();
    expect(limiter.openFor("a")).toBe(0);
  });

  test("credentials are counted apart, and a release counts once however often it is called", () => {
    const limiter = new StreamLimiter(2);
    const a = limiter.reserve("a");
    limiter.reserve("a");
    expect(codeOf(() => limiter.reserve("b"))).toBeNull();
    a();
    a();
    a();
    expect(limiter.openFor("a")).toBe(1);
    expect(limiter.openFor("b")).toBe(1);
  });
});

describe("credentialKey", () => {
  test("a bearer token is keyed by its kind and lookup part, not by the principal", () => {
    const token = issueToken("machine").token;
    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${token}`);
    const key = credentialKey({ ...user, kind: "machine" }, metadata);
    expect(key).toMatch(/^machine:/);
    expect(key).not.toContain(user.subjectId);
    expect(credentialKey({ ...user, kind: "machine" }, metadata)).toBe(key);
    const other = new grpc.Metadata();
    other.set("authorization", `Bearer ${issueToken("machine").token}`);
    expect(credentialKey({ ...user, kind: "machine" }, other)).not.toBe(key);
  });

  test("a gateway-signed principal is keyed by kind and subject (even next to a bearer token)", () => {
    const metadata = attachPrincipal(new grpc.Metadata(), user, KEY);
    expect(credentialKey(user, metadata)).toBe(`user:${user.subjectId}`);
    metadata.set("authorization", `Bearer ${issueToken("machine").token}`);
    expect(credentialKey(user, metadata)).toBe(`user:${user.subjectId}`);
  });
});
