/**
 * ReadUnread: what a drone may see since its inbox position; advances the position (not when peeking).
 *
 * Lock order: the drone row (`FOR UPDATE`: concurrent unread reads of one drone queue, so each
 * item is returned once). One transaction.
 */

import type { Principal } from "@unimatrix/service-kit/auth";
import { FailedPreconditionError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { READ } from "../rules/access";
import { viewerOf } from "../rules/visibility";
import { requireAccess } from "../store/access";
import { inTransaction } from "../store/prisma";
import { advanceInbox, lockInbox } from "../tables/drones";
import { type ItemPage, loadItems, scanVisible } from "../tables/entries";

/** What a drone may see since its inbox position, advancing the position past it unless `peek`. No effects. */
export async function readUnread(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  limit: number,
  peek = false,
): Promise<OpResult<ItemPage>> {
  if (principal.kind !== "drone-session") {
    throw new FailedPreconditionError("only drone sessions have an inbox");
  }
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "reading");
  const result = await inTransaction(deps.prisma, async (tx) => {
    const after = await lockInbox(tx, principal.droneId);
    const page = await scanVisible(tx, cubeId, after, viewerOf(s), limit);
    if (!peek && page.last !== after) await advanceInbox(tx, principal.droneId, page.last);
    return { items: await loadItems(tx, page.rows), after, last: page.last, hasMore: page.hasMore };
  });
  return { result, effects: {} };
}
