/**
 * ReleaseClaim: the holder lets go; the audience is told.
 *
 * Lock order: the claim row → the cube row (RELEASE positions) → notices. One transaction.
 */

import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { actorKey, WRITE } from "../rules/access";
import type { EntryRef } from "../rules/entry";
import { requireAccess } from "../store/access";
import { inTransaction } from "../store/prisma";
import type { Claim, ItemRow } from "../store/rows";
import { currentClaim, releaseHeld } from "../tables/claims";
import { claimAudience } from "../tables/drones";
import { loadItems, visibleEntry } from "../tables/entries";
import { aboutEntry, insertNotifications } from "./steps/notify";

/** What ReleaseClaim did: released, nothing to release, or held by another (with that claim); the entry. */
export interface ReleaseResult {
  readonly outcome: "released" | "none" | "other";
  readonly claim: Claim | null;
  readonly entry: ItemRow;
}

/** Releases the caller's claim; the audience (minus the releaser) is told. */
export async function releaseClaim(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  ref: EntryRef,
): Promise<OpResult<ReleaseResult>> {
  const s = await requireAccess(deps.prisma, principal, cubeId, WRITE, "releasing");
  const entry = await visibleEntry(deps.prisma, s, cubeId, ref);
  const entryId = entry.id;
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    let outcome: ReleaseResult["outcome"];
    let claim: Claim | null = null;
    if (await releaseHeld(tx, entryId, actorKey(principal), now)) {
      outcome = "released";
      const audience = await claimAudience(tx, entry, s.drone?.id);
      await insertNotifications(tx, cubeId, aboutEntry(audience, "release", entry, s), now);
    } else {
      claim = await currentClaim(tx, entryId);
      outcome = claim ? "other" : "none";
    }
    const [item] = await loadItems(tx, [entry]);
    return { outcome, claim, entry: item as ItemRow };
  });
  return { result, effects: result.outcome === "released" ? { activity: [cubeId] } : {} };
}
