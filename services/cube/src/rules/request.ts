import { InvalidArgumentError, requireText } from "@unimatrix/service-kit";

/** Length in characters (code points). */
export function charLength(value: string): number {
  let n = 0;
  for (const _ of value) n++;
  return n;
}

/** Unbounded bytes: the character limits below are what bounds names and short texts. */
const ANY_SIZE = { maxBytes: Number.MAX_SAFE_INTEGER };

/**
 * A trimmed-nonempty name of at most `max` characters (code points), without control characters
 * (the kit's `requireText`); INVALID_ARGUMENT naming `field` otherwise.
 */
export function name(field: string, value: string, max: number): string {
  requireText(field, value, ANY_SIZE);
  if (charLength(value) > max) throw new InvalidArgumentError(field, `must be at most ${max} characters`);
  return value;
}

/** Text of at most `max` characters (may be empty), without control characters. */
export function shortText(field: string, value: string, max: number): string {
  requireText(field, value, { ...ANY_SIZE, optional: true });
  if (charLength(value) > max) throw new InvalidArgumentError(field, `must be at most ${max} characters`);
  return value;
}

/** Text of at most `maxBytes` UTF-8 bytes (may be empty unless `required`), without control characters. */
export function boundedBytes(field: string, value: string, maxBytes: number, required = false): string {
  return requireText(field, value, { maxBytes, optional: !required });
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
