import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../../deps";
import { actorKey, WRITE } from "../../rules/access";
import type { EntryRef } from "../../rules/entry";
import { requireAccess } from "../../store/access";
import { visibleEntry } from "../../tables/entries";
import { labelOf } from "../../tables/principals";

/**
 * Where a claim write (claim, take-over) starts, before its transaction: the caller's standing
 * (WRITE, else `what` is refused), the entry it may see, the storage admission, now, and the
 * caller as a holder (its actor key, drone and label).
 */
export async function claimant(deps: CubeDeps, principal: Principal, cubeId: string, ref: EntryRef, what: string) {
  const s = await requireAccess(deps.prisma, principal, cubeId, WRITE, what);
  const entry = await visibleEntry(deps.prisma, s, cubeId, ref);
  await deps.guard.admit(300);
  const now = deps.clock.now();
  const key = actorKey(principal);
  const holder = {
    principalId: key,
    droneId: s.drone?.id ?? null,
    label: await labelOf(deps.prisma, principal, s.drone),
  };
  return { s, entry, now, key, holder };
}
