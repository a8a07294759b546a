/**
 * RenewClaim: the holder renews its lease explicitly (a STALE claim is HELD again, same fence).
 *
 * Lock order: the claim row. One statement (no transaction).
 */

import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { actorKey, WRITE } from "../rules/access";
import type { EntryRef } from "../rules/entry";
import { requireAccess } from "../store/access";
import type { Claim } from "../store/rows";
import { currentClaim, renewOne } from "../tables/claims";
import { visibleEntry } from "../tables/entries";

/** What RenewClaim did: renewed (a STALE claim is HELD again), or the caller is not the holder; the claim now. */
export interface RenewResult {
  readonly outcome: "renewed" | "not_holder";
  readonly claim: Claim | null;
}

/** Renews the caller's claim lease (same fence). Requires WRITE and a visible entry. No effects. */
export async function renewClaim(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  ref: EntryRef,
): Promise<OpResult<RenewResult>> {
  const s = await requireAccess(deps.prisma, principal, cubeId, WRITE, "renewing a claim");
  const { id: entryId } = await visibleEntry(deps.prisma, s, cubeId, ref);
  const now = deps.clock.now();
  const renewed = await renewOne(deps.prisma, entryId, actorKey(principal), now, deps.config.claimLeaseSeconds);
  const result: RenewResult = {
    outcome: renewed ? "renewed" : "not_holder",
    claim: await currentClaim(deps.prisma, entryId),
  };
  return { result, effects: {} };
}
