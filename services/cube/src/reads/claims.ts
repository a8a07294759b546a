/** CheckFence and ListReceipts: what the log knows of an entry's claim and its recipients. */

import type { Principal } from "@unimatrix/service-kit/auth";
import { PermissionDeniedError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import { READ } from "../rules/access";
import type { EntryRef } from "../rules/entry";
import { fenceHolds } from "../rules/lease";
import { requireAccess } from "../store/access";
import type { Claim, Receipt } from "../store/rows";
import { currentClaim, droneLive, leaseFacts } from "../tables/claims";
import { visibleEntry } from "../tables/entries";
import { receiptsOf } from "../tables/receipts";

/** CheckFence: whether `fence` is the entry's current HELD claim (strict, see fenceHolds). Requires READ. */
export async function checkFence(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  ref: EntryRef,
  fence: bigint,
): Promise<{ holds: boolean; claim: Claim | null }> {
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "checking a fence");
  const { id: entryId } = await visibleEntry(deps.prisma, s, cubeId, ref);
  const now = deps.clock.now();
  const claim = await currentClaim(deps.prisma, entryId);
  const holderLive = claim?.holderDroneId ? await droneLive(deps.prisma, claim.holderDroneId, now) : true;
  return { holds: fenceHolds(leaseFacts(claim), fence, now, holderLive), claim };
}

/**
 * The receipts of an entry, in recipient order, with each drone's label. Requires READ and a
 * visible entry; a drone caller must be the entry's author (else PERMISSION_DENIED).
 */
export async function listReceipts(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  ref: EntryRef,
): Promise<(Receipt & { label: string })[]> {
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "listing receipts");
  const entry = await visibleEntry(deps.prisma, s, cubeId, ref);
  if (principal.kind === "drone-session" && entry.authorDroneId !== principal.droneId)
    throw new PermissionDeniedError("only the entry's author drone lists its receipts");
  return receiptsOf(deps.prisma, entry.id);
}
