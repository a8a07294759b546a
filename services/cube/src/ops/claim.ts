/**
 * ClaimEntry: exclusive; the first claimant wins.
 *
 * Lock order: the claim row (insert, or the released row it takes) → the cube row (CLAIM
 * positions) → notices. One transaction.
 */
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { actorKey, WRITE } from "../rules/access";
import { requireAccess } from "../store/access";
import { inTransaction } from "../store/prisma";
import type { Claim, ItemRow } from "../store/rows";
import { claimIfFree, currentClaim } from "../tables/claims";
import { claimAudience } from "../tables/drones";
import { loadItems, visibleEntry } from "../tables/entries";
import { labelOf } from "../tables/principals";
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
  entryId: string,
): Promise<OpResult<ClaimResult>> {
  const s = await requireAccess(deps.prisma, principal, cubeId, WRITE, "claiming");
  const entry = await visibleEntry(deps.prisma, s, cubeId, entryId);
  await deps.guard.admit(300);
  const now = deps.clock.now();
  const key = actorKey(principal);
  const holder = {
    principalId: key,
    droneId: s.drone?.id ?? null,
    label: await labelOf(deps.prisma, principal, s.drone),
  };
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
