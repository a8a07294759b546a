import type { RawQuery } from "@unimatrix/service-kit/store";
import { staleAtFor } from "../rules/lease";

/**
 * Renews every HELD claim of a drone (its activity: post, ack, read, attach): renewed now, due a
 * claim lease from now. A STALE claim stays stale (RenewClaim brings it back explicitly).
 */
export async function renewHolderClaims(db: RawQuery, droneId: string, now: Date, leaseSeconds: number): Promise<void> {
  await db.$queryRaw`
    UPDATE claims SET renewed_at = ${now}, stale_at = ${staleAtFor(now, leaseSeconds)}
    WHERE holder_drone_id = ${droneId}::uuid AND state = 'held' AND renewed_at < ${now}
    RETURNING entry_id`;
}
