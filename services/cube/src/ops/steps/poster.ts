import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../../deps";
import { authorPrincipalId, WRITE } from "../../rules/access";
import { checkPoster, type NewEntry } from "../../rules/entry";
import { staleAtFor } from "../../rules/lease";
import { requireCachedAccess } from "../../store/access";
import { labelOf } from "../../tables/principals";

/**
 * Where every post (append, reply) starts, before anything is written: the author's standing
 * (WRITE, from the replica's auth cache), what it may post, the author as the row names it, now,
 * the instant its held claims renew to, and the storage admission.
 */
export async function poster(deps: CubeDeps, principal: Principal, cubeId: string, input: NewEntry) {
  const { view } = await requireCachedAccess(deps, principal, cubeId, WRITE, "posting");
  checkPoster(view, input);
  const label = await labelOf(deps.prisma, principal, view.drone);
  const now = deps.clock.now();
  const due = staleAtFor(now, deps.config.claimLeaseSeconds);
  const named = input.recipientDroneIds.length + input.recipientLabels.length;
  await deps.guard.admit(Buffer.byteLength(input.message) + named * 80 + 200);
  const author = { principalId: authorPrincipalId(principal), kind: principal.kind, droneId: view.drone?.id, label };
  return { view, now, due, author };
}
