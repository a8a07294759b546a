/**
 * TakeOverClaim: a participant takes a STALE claim with the fence it saw (fence + 1).
 *
 * Lock order: the claim row (`FOR UPDATE`, read once: concurrent callers on any replica queue on
 * it; the first takes it and every later one reads the moved fence) → the cube row (TAKEOVER
 * positions) → notices. One transaction.
 */

import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import type { EntryRef } from "../rules/entry";
import { type TakeOverDecision, takeOverDecision } from "../rules/lease";
import { inTransaction } from "../store/prisma";
import type { Claim } from "../store/rows";
import { currentClaim, lockClaim, takeOver } from "../tables/claims";
import { claimAudience } from "../tables/drones";
import { claimant } from "./steps/claimant";
import { aboutEntry, insertNotifications } from "./steps/notify";

/** What TakeOverClaim did, with the claim after the call (null when not claimed). */
export interface TakeOverResult {
  readonly outcome: TakeOverDecision;
  readonly claim: Claim | null;
}

/** Takes over a STALE claim; the former holder and the audience (minus the new holder) get TAKEOVER. */
export async function takeOverClaim(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  ref: EntryRef,
  fence: bigint,
): Promise<OpResult<TakeOverResult>> {
  const { s, entry, now, key, holder } = await claimant(deps, principal, cubeId, ref, "taking over a claim");
  const entryId = entry.id;
  const machines: string[] = [];
  const result = await inTransaction(deps.prisma, async (tx) => {
    const locked = await lockClaim(tx, entryId);
    const outcome = takeOverDecision(locked && { ...locked, staleAt: now }, key, fence);
    if (outcome === "take_over") {
      await takeOver(tx, entryId, holder, now, deps.config.claimLeaseSeconds);
      const audience = await claimAudience(tx, entry, s.drone?.id);
      const former = locked?.holderDroneId;
      if (former && former !== s.drone?.id && !audience.includes(former)) audience.unshift(former);
      const notified = await insertNotifications(tx, cubeId, aboutEntry(audience, "takeover", entry, s), now);
      machines.push(...notified.noticeMachines);
    }
    return { outcome, claim: await currentClaim(tx, entryId) };
  });
  const activity = result.outcome === "take_over" ? [cubeId] : [];
  return { result, effects: { activity, noticeMachines: machines } };
}
