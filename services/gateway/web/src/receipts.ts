import type { Receipt } from "./api";
import { receiptView } from "./coordination";
import { h, time } from "./dom";

/** What an entry's receipts panel shows: not read yet, the receipts, or why they cannot be read. */
export type ReceiptsState =
  | { readonly loading: true }
  | { readonly receipts: readonly Receipt[] }
  | { readonly error: string };

/**
 * A direct entry's receipts, one line per recipient: its furthest step as a badge, then when it
 * was delivered (and how), read, acked, and nudged for not reading.
 */
export function receiptsList(entryId: string, state: ReceiptsState): HTMLElement {
  const id = `receipts-${entryId}`;
  if ("loading" in state) return h("p", { class: "receipts muted", id }, "Reading receipts…");
  if ("error" in state) return h("p", { class: "receipts error", id, role: "alert" }, state.error);
  if (state.receipts.length === 0) return h("p", { class: "receipts muted", id }, "No receipts kept for this entry.");
  return h(
    "ul",
    { class: "plain receipts", id, "aria-label": "Receipts" },
    state.receipts.map((receipt) => {
      const view = receiptView(receipt);
      const step = (name: string, at: string | undefined, extra = "") =>
        at ? h("span", { class: "step", "data-step": name }, `${name} `, time(at), extra) : null;
      return h(
        "li",
        { "data-drone-id": view.droneId, "data-receipt": view.status },
        h("strong", {}, view.label),
        " ",
        h("span", { class: `badge receipt-${view.status}` }, view.status),
        step("delivered", view.deliveredAt, view.via ? ` via ${view.via}` : ""),
        step("read", view.readAt),
        step("acked", view.ackedAt),
        step("nudged", view.nudgedAt),
      );
    }),
  );
}
