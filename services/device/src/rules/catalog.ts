/** The closed sets of the device context: platforms, device statuses and audited events. */
import type { AuditEventType } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DevicePlatform, DeviceStatus } from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";

/** Stored platform names by wire value. */
export const PLATFORMS = {
  [DevicePlatform.LINUX]: "linux",
  [DevicePlatform.MACOS]: "macos",
  [DevicePlatform.WINDOWS]: "windows",
  [DevicePlatform.ANDROID]: "android",
  [DevicePlatform.IOS]: "ios",
} as const satisfies Partial<Record<DevicePlatform, string>>;

/** The stored name of a wire platform value; UNSPECIFIED or unknown values are refused. */
export function platform(value: DevicePlatform): string {
  const name = (PLATFORMS as Partial<Record<DevicePlatform, string>>)[value];
  if (!name) throw new InvalidArgumentError("platform", "must be one of LINUX, MACOS, WINDOWS, ANDROID, IOS");
  return name;
}

/** A stored device status. */
export type DeviceStatusName = "active" | "revoked";

/** A status filter: UNSPECIFIED = any. */
export function statusFilter(value: DeviceStatus): DeviceStatusName | null {
  if (value === DeviceStatus.UNSPECIFIED) return null;
  if (value === DeviceStatus.ACTIVE) return "active";
  if (value === DeviceStatus.REVOKED) return "revoked";
  throw new InvalidArgumentError("status", "must be ACTIVE, REVOKED or unset");
}

/** The closed set of audited events (mirrors AuditEventType, in its order, and the table's CHECK). */
export const AUDIT_TYPES = [
  "enroll_token_issued",
  "enroll_token_revoked",
  "device_enrolled",
  "device_revoked",
  "connection_acquired",
  "connection_fenced",
  "connection_released",
  "connection_expired",
  "session_placed",
  "session_rebound",
  "run_began",
  "run_ended",
] as const;
/** A stored audit event type. */
export type AuditType = (typeof AUDIT_TYPES)[number];

/** The stored name of a wire audit type (the enum lists AUDIT_TYPES in order from 1), or null. */
function auditTypeOf(value: AuditEventType): AuditType | null {
  return AUDIT_TYPES[value - 1] ?? null;
}

/**
 * The event-type filter of ListAuditEvents: deduplicated and sorted, so equal filters digest
 * equally; UNSPECIFIED or unknown values are refused.
 */
export function auditTypeFilter(values: readonly AuditEventType[]): AuditType[] {
  const types: AuditType[] = [];
  for (const value of values) {
    const type = auditTypeOf(value);
    if (!type) throw new InvalidArgumentError("event_types", "must not contain UNSPECIFIED or unknown types");
    if (!types.includes(type)) types.push(type);
  }
  return types.sort();
}
