/** Rows of `notification_marks`: when an actor last notified a recipient of a kind (the coalescing window). */
import type { RawQuery } from "@unimatrix/service-kit/store";

/** One (recipient, actor, kind) a notification would be counted under. */
export interface Mark {
  readonly recipientDroneId: string;
  readonly actorDroneId: string;
  readonly kind: string;
}

/**
 * Admits marks in one conditional upsert: a mark is admitted (and stamped `now`) when it is new or
 * its last one is at least the window old (`cutoff`). Concurrent writers on any replica agree: the
 * mark's row lock lets one through and the others see its fresh `last_at`. Returns the admitted
 * marks as `recipient/actor/kind` keys.
 */
export async function admitMarks(tx: RawQuery, marks: readonly Mark[], now: Date, cutoff: Date): Promise<Set<string>> {
  const admitted = await tx.$queryRaw<{ recipient_drone_id: string; actor_drone_id: string; kind: string }[]>`
    INSERT INTO notification_marks (recipient_drone_id, actor_drone_id, kind, last_at)
    SELECT r, a, k, ${now} FROM unnest(${marks.map((m) => m.recipientDroneId)}::uuid[],
                                      ${marks.map((m) => m.actorDroneId)}::uuid[],
                                      ${marks.map((m) => m.kind)}::text[]) AS x(r, a, k)
    ORDER BY r, a, k
    ON CONFLICT (recipient_drone_id, actor_drone_id, kind) DO UPDATE SET last_at = EXCLUDED.last_at
      WHERE notification_marks.last_at <= ${cutoff}
    RETURNING recipient_drone_id::text, actor_drone_id::text, kind`;
  return new Set(admitted.map((m) => `${m.recipient_drone_id}/${m.actor_drone_id}/${m.kind}`));
}
