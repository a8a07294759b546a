import { InvalidArgumentError } from "@unimatrix/service-kit/errors";

/** Length in characters (code points). */
export function charLength(value: string): number {
  let n = 0;
  for (const _ of value) n++;
  return n;
}

/**
 * Text that must not be only whitespace (the contract's `required` only refuses ""); lengths,
 * control characters and broken Unicode are the contract's rules, checked in the kit before any
 * handler. INVALID_ARGUMENT naming `field` otherwise.
 */
export function name(field: string, value: string): string {
  if (value.trim() === "") throw new InvalidArgumentError(field, "is required");
  return value;
}

/** The largest role description after a section patch, in UTF-8 bytes (the contract bounds each request). */
export const MAX_DOCUMENT_BYTES = 100_000;

/** Requires a known (non-zero) enum value. */
export function enumValue<T extends number>(field: string, value: T, allowed: readonly T[]): T {
  if (!allowed.includes(value)) throw new InvalidArgumentError(field, "must be one of the defined values");
  return value;
}
