import { status } from "@grpc/grpc-js";
import {
  auditFilters,
  decodePageToken,
  decodeSeqKey,
  decodeTimeKey,
  deviceFilters,
  encodePageToken,
  encodeSeqKey,
  encodeTimeKey,
  pageOf,
  tokenFilters,
} from "../src/rules/paging";
import { DEVICE, NOW, refusal } from "./rows";

const pageTokenRefusal = (fn: () => unknown) => {
  const error = refusal(fn);
  expect(error.code).toBe(status.INVALID_ARGUMENT);
  expect(error.field).toBe("page_token");
  return error.message;
};

describe("page tokens", () => {
  it("round-trip the last row's key under the same filters; '' is the first page", () => {
    const token = encodeTimeKey(NOW, DEVICE, deviceFilters("active"));
    expect(decodeTimeKey(token, deviceFilters("active"))).toEqual({ at: NOW, id: DEVICE });
    expect(decodeTimeKey("", deviceFilters("active"))).toBeNull();
    expect(decodeSeqKey(encodeSeqKey(42n, { m: "audit" }), { m: "audit" })).toBe(42n);
  });

  it("are bound to the request's filters: another filter or another list refuses them", () => {
    const token = encodeTimeKey(NOW, DEVICE, deviceFilters("active"));
    expect(pageTokenRefusal(() => decodeTimeKey(token, deviceFilters("revoked")))).toMatch(/does not match/);
    expect(pageTokenRefusal(() => decodeTimeKey(token, deviceFilters(null)))).toMatch(/does not match/);
    expect(pageTokenRefusal(() => decodeTimeKey(token, tokenFilters()))).toMatch(/does not match/);
    const audit = { deviceId: null, types: ["run_began"], start: NOW, end: null };
    const seq = encodeSeqKey(7n, auditFilters(audit));
    expect(decodeSeqKey(seq, auditFilters(audit))).toBe(7n);
    expect(pageTokenRefusal(() => decodeSeqKey(seq, auditFilters({ ...audit, types: ["run_ended"] })))).toMatch(
      /does not match/,
    );
    expect(pageTokenRefusal(() => decodeSeqKey(seq, auditFilters({ ...audit, start: null })))).toMatch(
      /does not match/,
    );
  });

  it("refuse malformed, tampered and wrong-arity tokens", () => {
    const filters = tokenFilters();
    expect(pageTokenRefusal(() => decodePageToken("not base64 json!", filters, 2))).toMatch(/malformed/);
    expect(pageTokenRefusal(() => decodePageToken(encodePageToken(["1"], filters), filters, 2))).toMatch(/malformed/);
    const forged = (key: unknown[]) => encodePageToken(key as string[], filters);
    expect(pageTokenRefusal(() => decodeTimeKey(forged(["soon", DEVICE]), filters))).toMatch(/malformed/);
    expect(pageTokenRefusal(() => decodeTimeKey(forged(["1", DEVICE.toUpperCase()]), filters))).toMatch(
      /lowercase UUID/,
    );
    expect(pageTokenRefusal(() => decodeTimeKey(forged([1, DEVICE]), filters))).toMatch(/malformed/);
    expect(pageTokenRefusal(() => decodeSeqKey(forged(["-1"]), filters))).toMatch(/malformed/);
    expect(pageTokenRefusal(() => decodeSeqKey(forged(["12345678901234567890"]), filters))).toMatch(/malformed/);
  });
});

describe("pages", () => {
  it("cut a read of limit + 1 rows to limit and point the next token at the last row kept", () => {
    expect(pageOf([1, 2, 3], 2, (last) => `after ${last}`)).toEqual({ page: [1, 2], nextPageToken: "after 2" });
    expect(pageOf([1, 2], 2, (last) => `after ${last}`)).toEqual({ page: [1, 2], nextPageToken: "" });
    expect(pageOf([], 2, (last) => `after ${last}`)).toEqual({ page: [], nextPageToken: "" });
  });
});
