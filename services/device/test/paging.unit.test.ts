import { status } from "@grpc/grpc-js";
import { PageTokens } from "@unimatrix/service-kit/rules";
import { auditFilters, deviceFilters, devicePageTokens, pageOf } from "../src/rules/paging";
import { DEVICE, NOW, refusal } from "./rows";

const KEY = "unit-test-internal-key-0123456789abcdef";
const pages = devicePageTokens(KEY);
const user = { caller: "user:u1", filter: deviceFilters("active") };

/** The message of a page_token refusal (INVALID_ARGUMENT naming page_token). */
const pageTokenRefusal = (fn: () => unknown) => {
  const error = refusal(fn);
  expect(error.code).toBe(status.INVALID_ARGUMENT);
  expect(error.field).toBe("page_token");
  return error.message;
};

describe("page tokens", () => {
  it("round-trip the last row's key for the same caller and filters; '' is the first page", () => {
    const token = pages.devices.seal({ at: NOW, id: DEVICE }, user);
    expect(pages.devices.open(token, user)).toEqual({ at: NOW, id: DEVICE });
    expect(pages.devices.open("", user)).toBeNull();
    const audit = { caller: "client:c1", filter: auditFilters({ deviceId: null, types: [], start: null, end: null }) };
    expect(pages.audit.open(pages.audit.seal(42n, audit), audit)).toBe(42n);
    expect(pages.audit.open(pages.audit.seal(2n ** 63n - 1n, audit), audit)).toBe(2n ** 63n - 1n);
  });

  it("are bound to the filters: another status, event type or time range refuses them", () => {
    const token = pages.devices.seal({ at: NOW, id: DEVICE }, user);
    pageTokenRefusal(() => pages.devices.open(token, { ...user, filter: deviceFilters("revoked") }));
    pageTokenRefusal(() => pages.devices.open(token, { ...user, filter: deviceFilters(null) }));
    const filter = { deviceId: null, types: ["run_began"], start: NOW, end: null };
    const audit = { caller: "user:u1", filter: auditFilters(filter) };
    const seq = pages.audit.seal(7n, audit);
    pageTokenRefusal(() =>
      pages.audit.open(seq, { ...audit, filter: auditFilters({ ...filter, types: ["run_ended"] }) }),
    );
    pageTokenRefusal(() => pages.audit.open(seq, { ...audit, filter: auditFilters({ ...filter, start: null }) }));
    pageTokenRefusal(() => pages.audit.open(seq, { ...audit, filter: auditFilters({ ...filter, deviceId: DEVICE }) }));
  });

  it("are bound to the caller: another user, client or device cannot continue the listing", () => {
    const token = pages.devices.seal({ at: NOW, id: DEVICE }, user);
    for (const caller of ["user:u2", "client:u1", "device:u1", "operator"]) {
      pageTokenRefusal(() => pages.devices.open(token, { ...user, caller }));
    }
  });

  it("are bound to their list and to this installation's key", () => {
    const binding = { caller: "user:u1" };
    const token = pages.enrollTokens.seal({ at: NOW, id: DEVICE }, binding);
    expect(pages.enrollTokens.open(token, binding)).toEqual({ at: NOW, id: DEVICE });
    pageTokenRefusal(() => pages.devices.open(token, binding));
    pageTokenRefusal(() => devicePageTokens(`${KEY}-other`).enrollTokens.open(token, binding));
  });

  it("refuse malformed and tampered tokens", () => {
    const token = pages.devices.seal({ at: NOW, id: DEVICE }, user);
    const [body, mac] = token.split(".") as [string, string];
    const forgedBody = Buffer.from(JSON.stringify([0, DEVICE])).toString("base64url");
    for (const bad of ["%%%", "no-dot", `${forgedBody}.${mac}`, `${body}.${mac.slice(1)}`, `${body}x.${mac}`]) {
      pageTokenRefusal(() => pages.devices.open(bad, user));
    }
  });

  it("refuse a sealed position of the wrong shape (a key from another build of a list)", () => {
    const sealer = new PageTokens(KEY, "unimatrix.device.v1.DeviceService/ListDevices");
    for (const position of [
      [NOW.getTime()],
      ["soon", DEVICE],
      [NOW.getTime(), DEVICE.toUpperCase()],
      [-1, DEVICE],
      "7",
    ]) {
      expect(pageTokenRefusal(() => pages.devices.open(sealer.seal(position, user), user))).toMatch(/malformed/);
    }
    const audit = new PageTokens(KEY, "unimatrix.device.v1.AuditService/ListAuditEvents");
    for (const position of [7, "-1", "12345678901234567890", ["7"]]) {
      const binding = { caller: "user:u1" };
      expect(pageTokenRefusal(() => pages.audit.open(audit.seal(position, binding), binding))).toMatch(/malformed/);
    }
  });
});

describe("pages", () => {
  it("cut a read of limit + 1 rows to limit and point the next token at the last row kept", () => {
    expect(pageOf([1, 2, 3], 2, (last) => `after ${last}`)).toEqual({ page: [1, 2], nextPageToken: "after 2" });
    expect(pageOf([1, 2], 2, (last) => `after ${last}`)).toEqual({ page: [1, 2], nextPageToken: "" });
    expect(pageOf([], 2, (last) => `after ${last}`)).toEqual({ page: [], nextPageToken: "" });
  });
});
