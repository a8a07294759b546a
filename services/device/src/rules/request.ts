/**
 * Request checks specific to the device contract (ids, page sizes and plain text checks come from
 * the kit's rules); each refuses bad input with INVALID_ARGUMENT naming the field.
 */
import { InvalidArgumentError, requireText } from "@unimatrix/service-kit";

const OPAQUE_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const PUBLIC_KEY = /^[A-Za-z0-9+/=_-]{1,128}$/;

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

/**
 * Free text, trimmed, of at most `max` characters (code points, not bytes) and, when `min` is 1,
 * not blank; the kit's text rule refuses control characters and broken Unicode first.
 */
export function text(field: string, value: string, max: number, min: 0 | 1 = 0): string {
  // A code point is at most 4 UTF-8 bytes, so the byte bound never bites before the character bound.
  requireText(field, value, { maxBytes: max * 4, optional: min === 0 });
  if ([...value].length > max) throw new InvalidArgumentError(field, `must be at most ${max} characters`);
  return value.trim();
}

/** A required string field: "" is INVALID_ARGUMENT "is required". */
export function required(field: string, value: string): string {
  if (value === "") throw new InvalidArgumentError(field, "is required");
  return value;
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
