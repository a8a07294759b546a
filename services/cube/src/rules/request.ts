import { InvalidArgumentError } from "@unimatrix/service-kit";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A request UUID, lower-cased; INVALID_ARGUMENT naming `field` otherwise. */
export function uuid(field: string, value: string): string {
  if (!UUID.test(value)) throw new InvalidArgumentError(field, "must be a UUID");
  return value.toLowerCase();
}

/** An optional UUID: empty/undefined → undefined. */
export function optionalUuid(field: string, value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : uuid(field, value);
}

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

/** `page_size`: 0 → 50, clamp at 500, negative is INVALID_ARGUMENT. */
export function pageSize(value: number, field = "page_size"): number {
  if (value < 0) throw new InvalidArgumentError(field, "must not be negative");
  if (value === 0) return 50;
  return Math.min(value, 500);
}

/** An offset page token bound to the parameters it was issued for. */
export function encodePageToken(offset: number, scope: string): string {
  return Buffer.from(JSON.stringify({ o: offset, s: scope })).toString("base64url");
}

/** Decodes a page token; INVALID_ARGUMENT naming `page_token` when malformed or for other parameters. */
export function decodePageToken(token: string, scope: string): number {
  if (token === "") return 0;
  try {
    const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as { o?: unknown; s?: unknown };
    if (typeof parsed.o === "number" && Number.isSafeInteger(parsed.o) && parsed.o >= 0 && parsed.s === scope)
      return parsed.o;
  } catch {
    // fall through
  }
  throw new InvalidArgumentError("page_token", "is malformed or was issued for other parameters");
}
