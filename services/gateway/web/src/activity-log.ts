import { ApiError, CUBE, type Entry, type Notification, type Receipt, rpc } from "./api";
import { countReply } from "./coordination";
import { enumLabel, h } from "./dom";
import { type EntryAction, entryItem } from "./panels";
import { type ReceiptsState, receiptsList } from "./receipts";

const MAX_ENTRIES = 1000;

/** What the activity list needs from its cube view. */
export interface ActivityLogOptions {
  readonly cubeId: string;
  /** The token reads and actions go out with (the seat's session, else the signed-in token). */
  readonly actor: () => string;
  readonly seatDroneId: () => string | undefined;
  readonly canWrite: () => boolean;
  readonly label: (droneId: string | undefined) => string;
  /** Opens an entry's thread; `reply` focuses the reply form replying to it. */
  readonly openThread: (entry: Entry, reply: boolean) => void;
  /** The seat's notifications card, where every notification is listed. */
  readonly notices: { add(notification: Notification): void };
  readonly announce: (message: string) => void;
  readonly showError: (error: unknown) => void;
  readonly clearError: () => void;
}

/**
 * The live activity list: the entries in view (at most the last 1000), each with its acks, claim
 * lease and actions (ack, claim, release, take over), the receipts panels open on direct entries,
 * and what notifications change on the entries they name.
 */
export function activityLog(options: ActivityLogOptions) {
  const { cubeId, actor } = options;
  const entries = new Map<string, Entry>();
  /** Receipts panels open on direct entries, by entry id. */
  const receipts = new Map<string, ReceiptsState>();
  const list = h("ol", { class: "log", id: "activity" });

  function renderEntry(entry: Entry): HTMLLIElement {
    return entryItem(entry, {
      seatDroneId: options.seatDroneId(),
      canWrite: options.canWrite(),
      label: options.label,
      act,
      parent: (id) => entries.get(id),
      thread: options.openThread,
      receipts: (id) => receipts.get(id),
      toggleReceipts,
    });
  }

  function upsert(entry: Entry) {
    const known = entries.get(entry.id);
    const merged = known ? { ...known, ...entry } : entry;
    entries.set(entry.id, merged);
    const node = renderEntry(merged);
    const existing = list.querySelector(`[data-entry-id="${CSS.escape(entry.id)}"]`);
    if (existing) existing.replaceWith(node);
    else {
      const stick = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
      list.append(node);
      while (list.children.length > MAX_ENTRIES) {
        const first = list.firstElementChild as HTMLElement;
        entries.delete(first.dataset.entryId ?? "");
        first.remove();
      }
      if (stick) list.scrollTop = list.scrollHeight;
    }
  }

  async function loadReceipts(entryId: string) {
    try {
      const answer = await rpc<{ receipts?: Receipt[] }>(
        `${CUBE}.ActivityService/ListReceipts`,
        { cubeId, entryId },
        actor(),
      );
      if (receipts.has(entryId)) receipts.set(entryId, { receipts: answer.receipts ?? [] });
    } catch (e) {
      if (receipts.has(entryId))
        receipts.set(entryId, { error: e instanceof ApiError ? `${e.message} (${e.code})` : (e as Error).message });
    }
    // Only the panel is redrawn, so focus on the entry's buttons survives the 5 s refresh.
    const state = receipts.get(entryId);
    const panel = document.getElementById(`receipts-${entryId}`);
    if (state && panel) panel.replaceWith(receiptsList(entryId, state));
  }

  function toggleReceipts(entry: Entry) {
    if (receipts.has(entry.id)) receipts.delete(entry.id);
    else {
      receipts.set(entry.id, { loading: true });
      void loadReceipts(entry.id);
    }
    upsert(entry);
    list.querySelector<HTMLButtonElement>(`[data-entry-id="${CSS.escape(entry.id)}"] [aria-controls]`)?.focus();
  }

  async function act(method: EntryAction, entry: Entry) {
    try {
      const body =
        method === "TakeOverClaim"
          ? { cubeId, entryId: entry.id, fence: entry.claim?.fence ?? "0" }
          : { cubeId, entryId: entry.id };
      const answer = await rpc<{ entry?: Entry; claim?: Entry["claim"]; outcome?: string }>(
        `${CUBE}.ActivityService/${method}`,
        body,
        actor(),
      );
      options.clearError();
      if (answer.entry)
        upsert(method === "ReleaseClaim" && !answer.entry.claim ? { ...answer.entry, claim: {} } : answer.entry);
      else if (method === "TakeOverClaim") upsert({ ...entry, claim: answer.claim ?? {} });
      if (answer.outcome === "CLAIM_OUTCOME_ALREADY_CLAIMED") options.announce("Someone else holds that claim");
      if (answer.outcome === "TAKE_OVER_OUTCOME_TAKEN_OVER") options.announce("You hold the claim now");
      else if (answer.outcome?.startsWith("TAKE_OVER_OUTCOME_"))
        options.announce(`Not taken over: ${enumLabel(answer.outcome, "TAKE_OVER_OUTCOME_")}`);
    } catch (e) {
      options.showError(e);
    }
  }

  return {
    list,
    /** The entry with this id, when it is in view. */
    get: (entryId: string) => entries.get(entryId),
    upsert,
    /**
     * An entry new to the view (from the stream, or posted here), counted into its thread's root;
     * returns the entry as the view now holds it.
     */
    add(entry: Entry): Entry {
      if (!entries.has(entry.id)) {
        const root = countReply(entries, entry);
        if (root) upsert(root);
      }
      upsert(entry);
      return entries.get(entry.id) ?? entry;
    },
    /** A notification: its acks and claim changes applied to the entry it names, then listed. */
    applyNotification(notification: Notification) {
      const entry = notification.entryId ? entries.get(notification.entryId) : undefined;
      if (entry) {
        if (notification.kind === "NOTIFICATION_KIND_ACK" && notification.actorDroneId) {
          const ackedBy = new Set(entry.ackedByDroneIds ?? []);
          ackedBy.add(notification.actorDroneId);
          upsert({ ...entry, ackedByDroneIds: [...ackedBy], ackCount: Math.max(entry.ackCount ?? 0, ackedBy.size) });
        } else if (notification.kind === "NOTIFICATION_KIND_CLAIM") {
          upsert({ ...entry, claim: { holderDroneId: notification.actorDroneId ?? "", state: "CLAIM_STATE_HELD" } });
        } else if (notification.kind === "NOTIFICATION_KIND_RELEASE") {
          upsert({ ...entry, claim: {} });
        } else if (notification.kind === "NOTIFICATION_KIND_CLAIM_STALE" && entry.claim) {
          upsert({
            ...entry,
            claim: {
              ...entry.claim,
              state: "CLAIM_STATE_STALE",
              staleAt: notification.createdAt ?? entry.claim.staleAt,
            },
          });
        } else if (notification.kind === "NOTIFICATION_KIND_TAKEOVER") {
          const fence = entry.claim?.fence ? String(BigInt(entry.claim.fence) + 1n) : undefined;
          upsert({
            ...entry,
            claim: { holderDroneId: notification.actorDroneId ?? "", fence, state: "CLAIM_STATE_HELD" },
          });
        }
      }
      options.notices.add(notification);
      if (notification.text) options.announce(notification.text);
    },
    /** Reads every open receipts panel again. */
    refreshReceipts() {
      for (const id of receipts.keys()) void loadReceipts(id);
    },
    /** Empties the list (before it is read again as another viewer). */
    clear() {
      list.replaceChildren();
      entries.clear();
    },
  };
}

/** The activity list of a cube view. */
export type ActivityLog = ReturnType<typeof activityLog>;
