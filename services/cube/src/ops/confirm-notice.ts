/**
 * ConfirmNotice: a machine confirms a notice it was sent.
 *
 * Lock order: the notice row (`FOR UPDATE OF`) → the entry's receipt. One transaction.
 */
import { NotFoundError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { inTransaction } from "../store/prisma";
import { lockNotice, stampConfirmed } from "../tables/notices";
import { markDelivered } from "../tables/receipts";

/**
 * Confirms a notice of the calling machine: sets `confirmed_at` once and, in the same
 * transaction, the entry's receipt delivered via MACHINE_LINK (first delivery only) when the
 * notice carried the entry (DIRECT) or a reply (REPLY). Idempotent: a repeat answers false and
 * changes nothing. NOT_FOUND when the notice is not this machine's. No effects.
 */
export async function confirmNotice(
  deps: CubeDeps,
  tenantId: string,
  machineId: string,
  noticeId: string,
): Promise<OpResult<boolean>> {
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    const row = await lockNotice(tx, tenantId, machineId, noticeId);
    if (!row) throw new NotFoundError("notice not found");
    if (row.confirmed_at !== null) return false;
    await stampConfirmed(tx, noticeId, now);
    // The entry itself (DIRECT) or a reply (its REPLY notification) was delivered; a CLAIM_STALE,
    // TAKEOVER or UNREAD_NUDGE about an entry is not that entry's delivery.
    if (row.entry_id && row.delivers) {
      await markDelivered(tx, { entryId: row.entry_id, droneId: row.drone_id, via: "machine_link", at: now });
    }
    return true;
  });
  return { result, effects: {} };
}
