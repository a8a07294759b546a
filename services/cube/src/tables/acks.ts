/** Rows of `acks`: one per (entry, principal). Row SQL only. */
import type { RawQuery } from "@unimatrix/service-kit/store";

/** Inserts an ack once per principal; whether this call inserted it. */
export async function insertAck(
  tx: RawQuery,
  entryId: string,
  principalId: string,
  droneId: string | null,
  now: Date,
): Promise<boolean> {
  const inserted = await tx.$queryRaw<{ entry_id: string }[]>`
    INSERT INTO acks (entry_id, principal_id, drone_id, created_at)
    VALUES (${entryId}::uuid, ${principalId}, ${droneId}::uuid, ${now})
    ON CONFLICT DO NOTHING RETURNING entry_id::text`;
  return inserted.length > 0;
}
