import { status } from "@grpc/grpc-js";
import { AuditEventType } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DevicePlatform, DeviceStatus } from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { AUDIT_TYPES, auditTypeFilter, platform, statusFilter } from "../src/rules/catalog";
import { timeRange, trimmed } from "../src/rules/request";
import { at, NOW, refusal } from "./rows";

/** The field an INVALID_ARGUMENT refusal names. */
const field = (fn: () => unknown) => {
  const error = refusal(fn);
  expect(error.code).toBe(status.INVALID_ARGUMENT);
  return error.field;
};

describe("request checks", () => {
  it("trims text and refuses blank text where it must not be blank (the contract holds lengths and characters)", () => {
    expect(trimmed("label", "  hi  ")).toBe("hi");
    expect(trimmed("label", "   ")).toBe("");
    expect(field(() => trimmed("reason", "   ", true))).toBe("reason");
    expect(trimmed("label", "two\nlines")).toBe("two\nlines");
  });

  it("takes a time range whose end is not before its start", () => {
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
