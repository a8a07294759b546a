/**
 * The page tokens of the device service's three lists: the kit's sealed PageTokens (HMAC with the
 * internal key), one purpose per RPC, bound to the caller's credential and the request's filters,
 * holding the last row's sort key. A foreign, tampered or re-filtered token is INVALID_ARGUMENT
 * naming `page_token`.
 */
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { isUuid, type PageBinding, PageTokens } from "@unimatrix/service-kit/rules";

/** A (time, id) keyset position: rows strictly before it come next (newest first). */
export interface TimeKey {
  readonly at: Date;
  readonly id: string;
}

/** Seals and opens one list's sort key. */
export interface KeyPages<K> {
  /** The token of the page after `key`. */
  seal(key: K, binding: PageBinding): string;
  /** The key a token continues after, or null for "" (the first page). */
  open(token: string, binding: PageBinding): K | null;
}

const malformed = () => new InvalidArgumentError("page_token", "is malformed");

/** (time, id) keys as `[epoch ms, uuid]`; an opened key of another shape is refused. */
function timeKeys(tokens: PageTokens): KeyPages<TimeKey> {
  return {
    seal: (key, binding) => tokens.seal([key.at.getTime(), key.id], binding),
    open(token, binding) {
      const key = tokens.open(token, binding);
      if (key === null) return null;
      if (!Array.isArray(key) || key.length !== 2) throw malformed();
      const [ms, id] = key;
      if (!Number.isSafeInteger(ms) || (ms as number) < 0 || typeof id !== "string" || !isUuid(id)) {
        throw malformed();
      }
      return { at: new Date(ms as number), id };
    },
  };
}

/** Audit seq keys as decimal text (a bigint). */
function seqKeys(tokens: PageTokens): KeyPages<bigint> {
  return {
    seal: (seq, binding) => tokens.seal(seq.toString(), binding),
    open(token, binding) {
      const key = tokens.open(token, binding);
      if (key === null) return null;
      if (typeof key !== "string" || !/^\d{1,19}$/.test(key)) throw malformed();
      return BigInt(key);
    },
  };
}

/** The three lists' page tokens, sealed with `internalKey`. */
export function devicePageTokens(internalKey: string) {
  return {
    devices: timeKeys(new PageTokens(internalKey, "unimatrix.device.v1.DeviceService/ListDevices")),
    enrollTokens: timeKeys(new PageTokens(internalKey, "unimatrix.device.v1.EnrollmentService/ListEnrollTokens")),
    audit: seqKeys(new PageTokens(internalKey, "unimatrix.device.v1.AuditService/ListAuditEvents")),
  };
}

/** The page tokens handlers use. */
export type DevicePageTokens = ReturnType<typeof devicePageTokens>;

/** The filters a ListDevices token is bound to. */
export const deviceFilters = (status: string | null) => ({ status });

/** The filters a ListAuditEvents token is bound to (types already sorted and deduplicated). */
export const auditFilters = (f: {
  deviceId: string | null;
  types: readonly string[];
  start: Date | null;
  end: Date | null;
}) => ({ deviceId: f.deviceId, types: f.types, s: f.start?.getTime() ?? null, e: f.end?.getTime() ?? null });

/** One page of `limit` rows from a read of `limit + 1`, and the token of the next page ("" = last). */
export function pageOf<Row>(rows: readonly Row[], limit: number, tokenOf: (last: Row) => string) {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { page, nextPageToken: rows.length > limit && last !== undefined ? tokenOf(last) : "" };
}
