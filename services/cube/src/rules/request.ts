import { InvalidArgumentError } from "@unimatrix/service-kit";

/** Length in characters (code points). */
export function charLength(value: string): number {
  let n = 0;
  for (const _ of value) n++;
  return n;
}

/** A trimmed-nonempty name of at most `max` characters. */
export function name(field: string, value: string, max: number): string {
  if (value.trim().length === 0) throw new InvalidArgumentError(field, "must not be empty");
  if (charLength(value) > max) throw new InvalidArgumentError(field, `must be at most ${max} characters`);
  return value;
}

/** Text of at most `max` characters (may be empty). */
export function shortText(field: string, value: string, max: number): string {
  if (charLength(value) > max) throw new InvalidArgumentError(field, `must be at most ${max} characters`);
  return value;
}

/** Text of at most `maxBytes` UTF-8 bytes (may be empty unless `required`). */
export function boundedBytes(field: string, value: string, maxBytes: number, required = false): string {
  if (required && value.trim().length === 0) throw new InvalidArgumentError(field, "must not be empty");
  if (Buffer.byteLength(value, "utf8") > maxBytes)
    throw new InvalidArgumentError(field, `must be at most ${maxBytes.toLocaleString("en-US")} bytes`);
  return value;
}

/** The largest directive, taxonomy and role description, in UTF-8 bytes. */
export const MAX_DOCUMENT_BYTES = 100_000;
/** The largest activity message or decision rationale, in UTF-8 bytes. */
export const MAX_MESSAGE_BYTES = 32_768;

/** Requires a known (non-zero) enum value. */
export function enumValue<T extends number>(field: string, value: T, allowed: readonly T[]): T {
  if (!allowed.includes(value)) throw new InvalidArgumentError(field, "must be one of the defined values");
  return value;
}
