import { createHash } from "node:crypto";
import { InvalidArgumentError } from "@unimatrix/service-kit";

/**
 * Opaque page tokens: base64url JSON of the last row's sort key and a fingerprint of the request's
 * filters, so a token used with other filters is refused instead of skipping or repeating rows.
 */
export function encodePageToken(key: readonly string[], filters: unknown): string {
  return Buffer.from(JSON.stringify({ k: key, f: fingerprint(filters) })).toString("base64url");
}

/** The sort key of a page token, or null for an empty token; INVALID_ARGUMENT when malformed. */
export function decodePageToken(token: string, filters: unknown, arity: number): string[] | null {
  if (token === "") return null;
  let parsed: { k?: unknown; f?: unknown };
  try {
    parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as { k?: unknown; f?: unknown };
  } catch {
    throw new InvalidArgumentError("page_token", "is malformed");
  }
  const key = parsed?.k;
  if (!Array.isArray(key) || key.length !== arity || !key.every((part) => typeof part === "string")) {
    throw new InvalidArgumentError("page_token", "is malformed");
  }
  if (parsed.f !== fingerprint(filters)) {
    throw new InvalidArgumentError("page_token", "does not match the request's filters");
  }
  return key as string[];
}

function fingerprint(filters: unknown): string {
  return createHash("sha256").update(JSON.stringify(filters)).digest("base64url").slice(0, 16);
}

/** A Date from a token part, or INVALID_ARGUMENT. */
export function tokenDate(value: string): Date {
  const date = new Date(Number(value));
  if (!/^\d+$/.test(value) || Number.isNaN(date.getTime()))
    throw new InvalidArgumentError("page_token", "is malformed");
  return date;
}

/** A bigint from a token part, or INVALID_ARGUMENT. */
export function tokenBigint(value: string): bigint {
  if (!/^\d{1,19}$/.test(value)) throw new InvalidArgumentError("page_token", "is malformed");
  return BigInt(value);
}
