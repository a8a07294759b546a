/**
 * What a drone's reads and waits write: its activity renews its HELD claims, and a read stamps the
 * first read of the entries it returned on their receipts.
 *
 * Lock order: the drone's claim rows → its receipts. Each is one autocommit statement (no
 * transaction); they run together, as no lock is held from one into the other.
 */
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import type { ItemRow } from "../store/rows";
import { renewHeldClaims } from "../tables/claims";
import { markRead } from "../tables/receipts";

/** After a drone read items (ReadActivity, ReadUnread, ReadThread): its receipts and claims. Other principals: nothing. */
export async function noteRead(
  deps: CubeDeps,
  principal: Principal,
  items: readonly ItemRow[],
): Promise<OpResult<void>> {
  if (principal.kind !== "drone-session") return { result: undefined, effects: {} };
  const entryIds = items.filter((i) => i.row.itemType === "entry").map((i) => i.row.id);
  const now = deps.clock.now();
  await Promise.all([
    renewHeldClaims(deps.fast, principal.droneId, now, deps.config.claimLeaseSeconds),
    markRead(deps.fast, principal.droneId, entryIds, now),
  ]);
  return { result: undefined, effects: {} };
}

/** A drone opened a stream (MCP log_wait opens one per wait): its activity renews its claims. */
export async function noteWait(deps: CubeDeps, principal: Principal): Promise<OpResult<void>> {
  if (principal.kind === "drone-session")
    await renewHeldClaims(deps.fast, principal.droneId, deps.clock.now(), deps.config.claimLeaseSeconds);
  return { result: undefined, effects: {} };
}
