import { DevicePlatform, DeviceStatus } from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { InvalidArgumentError } from "@unimatrix/service-kit";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const OPAQUE_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const PUBLIC_KEY = /^[A-Za-z0-9+/=_-]{1,128}$/;

/** A canonical lowercase UUID, or INVALID_ARGUMENT naming `field`. */
export function uuid(field: string, value: string): string {
  if (!UUID.test(value)) throw new InvalidArgumentError(field, "must be a lowercase UUID");
  return value;
}

/** A root session or run id: 1-128 characters from [A-Za-z0-9._:-]. */
export function opaqueId(field: string, value: string): string {
  if (!OPAQUE_ID.test(value)) throw new InvalidArgumentError(field, "must be 1-128 characters from [A-Za-z0-9._:-]");
  return value;
}

/** A public key as base64/base64url or hex text, 1-128 characters. */
export function publicKey(value: string): string {
  if (!PUBLIC_KEY.test(value)) throw new InvalidArgumentError("public_key", "must be 1-128 base64 or hex characters");
  return value;
}

/** Free text of at most `max` characters (and at least `min`, after trimming). */
export function text(field: string, value: string, max: number, min = 0): string {
  const trimmed = value.trim();
  if (trimmed.length < min) throw new InvalidArgumentError(field, "is required");
  if ([...value].length > max) throw new InvalidArgumentError(field, `must be at most ${max} characters`);
  return trimmed;
}

/** Enroll token lifetime: whole seconds (the wire type is uint32), 1 to 604800. */
export function ttlSeconds(value: number): number {
  if (!Number.isInteger(value) || value < 1 || value > 604_800) {
    throw new InvalidArgumentError("ttl_seconds", "must be a whole number of seconds from 1 to 604800");
  }
  return value;
}

const PLATFORMS: Record<number, string> = {
  [DevicePlatform.LINUX]: "linux",
  [DevicePlatform.MACOS]: "macos",
  [DevicePlatform.WINDOWS]: "windows",
  [DevicePlatform.ANDROID]: "android",
  [DevicePlatform.IOS]: "ios",
};

/** The stored name of a platform from the closed set; UNSPECIFIED or unknown values are refused. */
export function platform(value: DevicePlatform): string {
  const name = PLATFORMS[value];
  if (!name) throw new InvalidArgumentError("platform", "must be one of LINUX, MACOS, WINDOWS, ANDROID, IOS");
  return name;
}

/** The wire value of a stored platform. */
export function platformOf(name: string): DevicePlatform {
  const entry = Object.entries(PLATFORMS).find(([, stored]) => stored === name);
  return entry ? (Number(entry[0]) as DevicePlatform) : DevicePlatform.UNSPECIFIED;
}

/** A status filter: UNSPECIFIED = any. */
export function statusFilter(value: DeviceStatus): "active" | "revoked" | null {
  if (value === DeviceStatus.UNSPECIFIED) return null;
  if (value === DeviceStatus.ACTIVE) return "active";
  if (value === DeviceStatus.REVOKED) return "revoked";
  throw new InvalidArgumentError("status", "must be ACTIVE, REVOKED or unset");
}

/** Page size: 0 = 50, capped at 500, negative refused. */
export function pageSize(value: number): number {
  if (value < 0) throw new InvalidArgumentError("page_size", "must not be negative");
  return value === 0 ? 50 : Math.min(value, 500);
}

/** A positive revision. */
export function expectedRev(value: bigint): bigint {
  if (value < 1n) throw new InvalidArgumentError("expected_rev", "must be at least 1");
  return value;
}
