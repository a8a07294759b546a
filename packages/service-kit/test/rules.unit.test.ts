import { status } from "@grpc/grpc-js";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { optionalUuid, PageTokens, pageSize, requireUuid } from "@unimatrix/service-kit/rules";
import { expectStatus } from "@unimatrix/service-kit/testing";

const KEY = "unit-test-key-0123456789abcdef0123456789";
const ID = "0b4c8e2a-5f1d-4c3b-9a7e-1d2f3a4b5c6d";

/** The INVALID_ARGUMENT message of a rule that should refuse. */
function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    return (error as InvalidArgumentError).message;
  }
  throw new Error("expected INVALID_ARGUMENT, got a value");
}

describe("requireUuid", () => {
  it("returns a canonical lowercase UUID unchanged", () => {
    expect(requireUuid("cube_id", ID)).toBe(ID);
  });

  it("refuses upper case, empty, braces and near misses, naming the field", () => {
    expect(refusal(() => requireUuid("cube_id", ID.toUpperCase()))).toBe("cube_id: must be a canonical lowercase UUID");
    expect(refusal(() => requireUuid("cube_id", ""))).toBe("cube_id: is required");
    for (const bad of [`{${ID}}`, ID.slice(1), `${ID} `, ID.replaceAll("-", ""), "not-a-uuid"]) {
      expect(refusal(() => requireUuid("drone_id", bad))).toMatch(/^drone_id: /);
    }
  });

  it("optionalUuid: empty or undefined is absent, anything else is checked", () => {
    expect(optionalUuid("role_id", "")).toBeUndefined();
    expect(optionalUuid("role_id", undefined)).toBeUndefined();
    expect(optionalUuid("role_id", ID)).toBe(ID);
    expect(refusal(() => optionalUuid("role_id", ID.toUpperCase()))).toMatch(/^role_id: /);
  });
});

describe("pageSize", () => {
  it("0 is the default, larger asks are clamped, in-range values pass", () => {
    expect(pageSize("page_size", 0)).toBe(50);
    expect(pageSize("page_size", 7)).toBe(7);
    expect(pageSize("page_size", 10_000)).toBe(500);
    expect(pageSize("page_size", 0, { default: 20, max: 100 })).toBe(20);
    expect(pageSize("page_size", 101, { default: 20, max: 100 })).toBe(100);
  });

  it("negative or fractional is INVALID_ARGUMENT naming the field", () => {
    expect(refusal(() => pageSize("page_size", -1))).toBe("page_size: must not be negative");
    expect(refusal(() => pageSize("limit", 1.5))).toBe("limit: must be a whole number");
  });
});

describe("PageTokens", () => {
  const tokens = new PageTokens(KEY, "ListDevices");
  const alice = { caller: "user:alice", filter: { status: "active" } };

  it("opens what it sealed for the same caller and filter; the empty token is the first page", () => {
    const token = tokens.seal(["1700000000000", ID], alice);
    expect(tokens.open(token, alice)).toEqual(["1700000000000", ID]);
    expect(tokens.open(token, { caller: "user:alice", filter: { status: "active" } })).toEqual(["1700000000000", ID]);
    expect(tokens.open("", alice)).toBeNull();
  });

  it("refuses a tampered body or signature, naming page_token", async () => {
    const token = tokens.seal({ offset: 50 }, alice);
    const [body, mac] = token.split(".") as [string, string];
    const forged = `${Buffer.from(JSON.stringify({ offset: 0 })).toString("base64url")}.${mac}`;
    const flipped = `${body}.${mac.slice(0, -2)}${mac.endsWith("A") ? "BB" : "AA"}`;
    for (const bad of [forged, flipped, body, `${token}x`, "garbage", ".", `${body}.`]) {
      await expectStatus(
        Promise.resolve().then(() => tokens.open(bad, alice)),
        status.INVALID_ARGUMENT,
        "page_token",
      );
    }
  });

  it("refuses another caller's token, one reused with other filters, and one of another RPC", () => {
    const token = tokens.seal(10, alice);
    expect(refusal(() => tokens.open(token, { caller: "user:bob", filter: alice.filter }))).toMatch(/^page_token: /);
    expect(refusal(() => tokens.open(token, { caller: alice.caller, filter: { status: "revoked" } }))).toMatch(
      /^page_token: /,
    );
    expect(refusal(() => tokens.open(token, { caller: alice.caller }))).toMatch(/^page_token: /);
    expect(refusal(() => new PageTokens(KEY, "ListAudit").open(token, alice))).toMatch(/^page_token: /);
    expect(refusal(() => new PageTokens(`${KEY}x`, "ListDevices").open(token, alice))).toMatch(/^page_token: /);
  });
});
