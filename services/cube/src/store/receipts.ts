// PLACEHOLDER until the `coord` branch's RECEIPTS-STORE commit is merged (its file replaces this one).
import type { RawQuery } from "@unimatrix/service-kit/store";

/** How an entry reached a recipient (the `delivered_via` column). */
export type DeliveryVia = "stream" | "machine_link";

/** One delivery to record. */
export interface Delivery {
  readonly entryId: string;
  readonly droneId: string;
  readonly via: DeliveryVia;
  readonly at: Date;
}

/** Placeholder: records nothing until the receipts table exists. */
export async function markDelivered(_db: RawQuery, _delivery: Delivery): Promise<boolean> {
  return false;
}
