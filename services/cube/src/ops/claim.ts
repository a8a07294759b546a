/**
 * ClaimEntry: exclusive; the first claimant wins.
 *
 * Lock order: the claim row (insert, or the released row it takes) → the cube row (CLAIM
 * positions) → notices. One transaction.
 */

import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import type { EntryRef } from "../rules/entry";
import { inTransaction } from "../store/prisma";
import type { Claim, ItemRow } from "../store/rows";
import { claimIfFree, currentClaim } from "../tables/claims";
import { claimAudience } from "../tables/drones";
import { loadItems } from "../tables/entries";
import { claimant } from "./steps/claimant";
import { aboutEntry, insertNotifications } from "./steps/notify";

/** What ClaimEntry did: claimed now, already held by the caller, or held by another; the claim and the entry. */
export interface ClaimResult {
  readonly outcome: "claimed" | "held" | "other";
  readonly claim: Claim | null;
  readonly entry: ItemRow;
}

/** Claims an entry exclusively: the first claimant wins; one CLAIM notification per audience drone. */
export async function claimEntry(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  ref: EntryRef,
): Promise<OpResult<ClaimResult>> {
  const { s, entry, now, key, holder } = await claimant(deps, principal, cubeId, ref, "claiming");
  const entryId = entry.id;
  const result = await inTransaction(deps.prisma, async (tx) => {
    let outcome: ClaimResult["outcome"];
    if (await claimIfFree(tx, cubeId, entryId, holder, now, deps.config.claimLeaseSeconds)) {
      outcome = "claimed";
      const audience = await claimAudience(tx, entry, s.drone?.id);
      await insertNotifications(tx, cubeId, aboutEntry(audience, "claim", entry, s), now);
    } else {
      const held = await currentClaim(tx, entryId);
      outcome = held?.holderPrincipalId === key ? "held" : "other";
    }
    // Null only when the holder released it in between (READ COMMITTED): answered as no claim.
    const claim = await currentClaim(tx, entryId);
    const [item] = await loadItems(tx, [entry]);
    return { outcome, claim, entry: item as ItemRow };
  });
  return { result, effects: result.outcome === "claimed" ? { activity: [cubeId] } : {} };
}
