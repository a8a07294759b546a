import { status } from "@grpc/grpc-js";
import { AuditEventType } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DevicePlatform, DeviceStatus } from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { AUDIT_TYPES, auditTypeFilter, platform, statusFilter } from "../src/rules/catalog";
import { expectedRev, opaqueId, publicKey, required, text, timeRange } from "../src/rules/request";
import { at, NOW, refusal } from "./rows";

/** The field an INVALID_ARGUMENT refusal names. */
const field = (fn: () => unknown) => {
  const error = refusal(fn);
  expect(error.code).toBe(status.INVALID_ARGUMENT);
  return error.field;
};

describe("request checks", () => {
  it("takes root session and run ids of 1-128 characters from [A-Za-z0-9._:-]", () => {
    expect(opaqueId("run_id", "run:1.a_b-C")).toBe("run:1.a_b-C");
    expect(opaqueId("run_id", "x".repeat(128))).toHaveLength(128);
    for (const bad of ["", "x".repeat(129), "a b", "a/b", "ä"])
      expect(field(() => opaqueId("run_id", bad))).toBe("run_id");
  });

  it("takes public keys of 1-128 base64 or hex characters", () => {
    expect(publicKey("q83v+/A=_-")).toBe("q83v+/A=_-");
    expect(field(() => publicKey(""))).toBe("public_key");
    expect(field(() => publicKey("a".repeat(129)))).toBe("public_key");
  });

  it("trims text, counts characters not bytes, and enforces a minimum", () => {
    expect(text("label", "  hi  ", 200)).toBe("hi");
    expect(text("label", "é".repeat(200), 200)).toHaveLength(200);
    expect(field(() => text("label", "x".repeat(201), 200))).toBe("label");
    expect(field(() => text("reason", "   ", 500, 1))).toBe("reason");
    expect(field(() => required("token", ""))).toBe("token");
    expect(field(() => text("display_name", "a\u0000b", 200))).toBe("display_name");
    expect(field(() => text("label", "bell\u0007", 200))).toBe("label");
    expect(text("label", "two\nlines", 200)).toBe("two\nlines");
  });

  it("takes a revision of at least 1 and a time range whose end is not before its start", () => {
    expect(expectedRev(1n)).toBe(1n);
    expect(field(() => expectedRev(0n))).toBe("expected_rev");
    expect(timeRange(NOW, NOW)).toEqual({ start: NOW, end: NOW });
    expect(timeRange(null, NOW)).toEqual({ start: null, end: NOW });
    expect(field(() => timeRange(NOW, at(-1)))).toBe("end_time");
  });
});

describe("closed sets", () => {
  it("stores the five platforms and refuses UNSPECIFIED or unknown values", () => {
    expect(platform(DevicePlatform.LINUX)).toBe("linux");
    expect(platform(DevicePlatform.IOS)).toBe("ios");
    expect(field(() => platform(DevicePlatform.UNSPECIFIED))).toBe("platform");
    expect(field(() => platform(99 as DevicePlatform))).toBe("platform");
  });

  it("filters by status: unset = any", () => {
    expect(statusFilter(DeviceStatus.UNSPECIFIED)).toBeNull();
    expect(statusFilter(DeviceStatus.ACTIVE)).toBe("active");
    expect(statusFilter(DeviceStatus.REVOKED)).toBe("revoked");
    expect(field(() => statusFilter(9 as DeviceStatus))).toBe("status");
  });

  it("lists the wire's audit event types in the wire's order", () => {
    const wire = Object.entries(AuditEventType)
      .filter(([name, value]) => typeof value === "number" && name !== "UNSPECIFIED")
      .map(([name, value]) => [value, name.toLowerCase()]);
    expect(wire).toEqual(AUDIT_TYPES.map((type, index) => [index + 1, type]));
  });

  it("deduplicates and sorts an event-type filter, refusing UNSPECIFIED", () => {
    const filter = [AuditEventType.RUN_ENDED, AuditEventType.DEVICE_ENROLLED, AuditEventType.RUN_ENDED];
    expect(auditTypeFilter(filter)).toEqual(["device_enrolled", "run_ended"]);
    expect(field(() => auditTypeFilter([AuditEventType.UNSPECIFIED]))).toBe("event_types");
    expect(field(() => auditTypeFilter([42 as AuditEventType]))).toBe("event_types");
  });
});
