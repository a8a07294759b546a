/** Request checks of the device contract: each refuses bad input with INVALID_ARGUMENT naming the field. */
import { InvalidArgumentError } from "@unimatrix/service-kit";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const OPAQUE_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const PUBLIC_KEY = /^[A-Za-z0-9+/=_-]{1,128}$/;

/** A canonical lowercase UUID, or INVALID_ARGUMENT naming `field`. */
export function uuid(field: string, value: string): string {
  if (!UUID.test(value)) throw new InvalidArgumentError(field, "must be a lowercase UUID");
  return value;
}

/** An optional UUID: "" = absent (null). */
export function optionalUuid(field: string, value: string): string | null {
  return value === "" ? null : uuid(field, value);
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

/** A required string field: "" is INVALID_ARGUMENT "is required". */
export function required(field: string, value: string): string {
  if (value === "") throw new InvalidArgumentError(field, "is required");
  return value;
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

/** A time range `start ≤ at < end`; either end may be open; an end before the start is refused. */
export function timeRange(start: Date | null, end: Date | null): { start: Date | null; end: Date | null } {
  if (start && end && end.getTime() < start.getTime()) {
    throw new InvalidArgumentError("end_time", "must not be before start_time");
  }
  return { start, end };
}
