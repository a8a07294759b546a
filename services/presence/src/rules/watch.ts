import { InvalidArgumentError } from "@unimatrix/service-kit/errors";

/** Largest cursor (int64): a bigger `after` is just above the head. */
export const MAX_CURSOR = 9223372036854775807n;

/** Events per backlog page (feed drains and watcher catch-up alike). */
export const PAGE = 256;

/**
 * The resume cursor of a request: null for none, or a non-negative integer. A value too large
 * for the sequence is simply above the head (a reset snapshot), not an error.
 */
export function parseCursor(after: string): bigint | null {
  if (after === "") return null;
  if (!/^[0-9]+$/.test(after)) throw new InvalidArgumentError("after", "must be a non-negative decimal integer");
  const value = BigInt(after);
  return value > MAX_CURSOR ? MAX_CURSOR : value;
}

/** Where a watch starts: a snapshot (reset when a cursor was given but cannot be resumed), or the cursor. */
export type WatchStart =
  | { readonly snapshot: true; readonly reset: boolean }
  | { readonly snapshot: false; readonly cursor: bigint };

/**
 * The snapshot/resume decision: no cursor → snapshot (no reset); a cursor below the tenant's
 * floor (pruned) or above its head (unknown) → reset snapshot; otherwise resume after it.
 */
export function watchStart(after: bigint | null, log: { readonly floor: bigint; readonly head: bigint }): WatchStart {
  if (after === null) return { snapshot: true, reset: false };
  if (after < log.floor || after > log.head) return { snapshot: true, reset: true };
  return { snapshot: false, cursor: after };
}
