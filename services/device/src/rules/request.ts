/**
 * Request checks the contract cannot state (its `buf.validate` rules, checked once in the kit,
 * hold the ids, lengths, patterns and ranges); each refuses bad input with INVALID_ARGUMENT
 * naming the field.
 */
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";

/**
 * Free text as stored: trimmed and, with `notBlank`, not only whitespace. Lengths, control
 * characters and broken Unicode are the contract's rules (checked in the kit before any handler).
 */
export function trimmed(field: string, value: string, notBlank = false): string {
  const out = value.trim();
  if (notBlank && out === "") throw new InvalidArgumentError(field, "must not be blank");
  return out;
}

/** A time range `start ≤ at < end`; either end may be open; an end before the start is refused. */
export function timeRange(start: Date | null, end: Date | null): { start: Date | null; end: Date | null } {
  if (start && end && end.getTime() < start.getTime()) {
    throw new InvalidArgumentError("end_time", "must not be before start_time");
  }
  return { start, end };
}
