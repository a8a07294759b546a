/**
 * AckEntry: once per principal.
 *
 * Lock order: the ack row (insert) → the acking drone's HELD claims → its receipt → notification
 * marks → the cube row (ACK position) → notices. One transaction.
 */

import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { actorKey, WRITE } from "../rules/access";
import type { EntryRef } from "../rules/entry";
import { notificationText } from "../rules/preview";
import { requireAccess } from "../store/access";
import { inTransaction } from "../store/prisma";
import type { ItemRow } from "../store/rows";
import { insertAck } from "../tables/acks";
import { renewHeldClaims } from "../tables/claims";
import { loadItems, visibleEntry } from "../tables/entries";
import { markAcked } from "../tables/receipts";
import { insertNotifications } from "./steps/notify";

/** What AckEntry did: whether this ack is new, and the entry as it is now. */
export interface AckResult {
  readonly newlyAcked: boolean;
  readonly entry: ItemRow;
}

/**
 * Acks an entry once per principal. A new ack by a drone marks its receipt acked, renews its held
 * claims, and notifies the author drone — unless the ack is quiet, the entry expects no reply, or
 * the same drone acked to the same author within the coalescing window.
 */
export async function ackEntry(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  ref: EntryRef,
  quiet = false,
): Promise<OpResult<AckResult>> {
  const s = await requireAccess(deps.prisma, principal, cubeId, WRITE, "acking");
  const entry = await visibleEntry(deps.prisma, s, cubeId, ref);
  const entryId = entry.id;
  await deps.guard.admit(300);
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    const newlyAcked = await insertAck(tx, entryId, actorKey(principal), s.drone?.id ?? null, now);
    if (newlyAcked && s.drone) {
      await renewHeldClaims(tx, s.drone.id, now, deps.config.claimLeaseSeconds);
      await markAcked(tx, s.drone.id, entryId, now);
    }
    const notify =
      newlyAcked &&
      !quiet &&
      entry.expectsReply &&
      s.drone &&
      entry.authorDroneId &&
      entry.authorDroneId !== s.drone.id;
    if (notify && s.drone && entry.authorDroneId) {
      await insertNotifications(
        tx,
        cubeId,
        [
          {
            recipientDroneId: entry.authorDroneId,
            kind: "ack",
            text: notificationText("ack", entry.message),
            entryId,
            actorDroneId: s.drone.id,
            actorRoleName: s.drone.roleName,
          },
        ],
        now,
        deps.config.notifyCoalesceSeconds,
      );
    }
    const [item] = await loadItems(tx, [entry]);
    return { newlyAcked, entry: item as ItemRow };
  });
  return { result, effects: result.newlyAcked ? { activity: [cubeId] } : {} };
}
