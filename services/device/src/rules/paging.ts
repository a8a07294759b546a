/**
 * Opaque page tokens: base64url JSON of the last row's sort key and a fingerprint of the request's
 * filters, so a token used with other filters is refused instead of skipping or repeating rows.
 * Each list's key (devices, enroll tokens, audit rows) has its own pair below.
 */
import { createHash } from "node:crypto";
import { InvalidArgumentError } from "@unimatrix/service-kit";
import { uuid } from "./request";

/** The token of a sort key under `filters`. */
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

/** One page of `limit` rows from a read of `limit + 1`, and the token of the next page ("" = last). */
export function pageOf<Row>(rows: readonly Row[], limit: number, tokenOf: (last: Row) => string) {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { page, nextPageToken: rows.length > limit && last !== undefined ? tokenOf(last) : "" };
}

/** A (time, id) keyset position: rows strictly before it come next (newest first). */
export interface TimeKey {
  readonly at: Date;
  readonly id: string;
}

/** The filters a ListDevices token is bound to. */
export const deviceFilters = (status: string | null) => ({ m: "devices", status });
/** The filters a ListEnrollTokens token is bound to. */
export const tokenFilters = () => ({ m: "tokens" });
/** The filters a ListAuditEvents token is bound to (types already sorted). */
export const auditFilters = (f: {
  deviceId: string | null;
  types: readonly string[];
  start: Date | null;
  end: Date | null;
}) => ({
  m: "audit",
  deviceId: f.deviceId,
  types: f.types,
  s: f.start?.getTime() ?? null,
  e: f.end?.getTime() ?? null,
});

/** The (time, id) key of a device or enroll token page token, or null for the first page. */
export function decodeTimeKey(token: string, filters: unknown): TimeKey | null {
  const key = decodePageToken(token, filters, 2);
  return key ? { at: tokenDate(key[0] as string), id: uuid("page_token", key[1] as string) } : null;
}

/** The page token after a row at (time, id). */
export function encodeTimeKey(at: Date, id: string, filters: unknown): string {
  return encodePageToken([String(at.getTime()), id], filters);
}

/** The audit seq of a page token (rows below it come next), or null for the first page. */
export function decodeSeqKey(token: string, filters: unknown): bigint | null {
  const key = decodePageToken(token, filters, 1);
  return key ? tokenBigint(key[0] as string) : null;
}

/** The page token after an audit row. */
export function encodeSeqKey(seq: bigint, filters: unknown): string {
  return encodePageToken([seq.toString()], filters);
}
