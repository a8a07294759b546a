import { CUBE, type Decision, type Drone, type Entry, type Role, rpc } from "./api";
import { claimView, mayListReceipts, preview, repliesText, seatChangeText, seatStateView } from "./coordination";
import { enumLabel, h, replace, time } from "./dom";
import { type ReceiptsState, receiptsList } from "./receipts";

/** How long a live drone may stay quiet before the console marks it silent. */
const QUIET_MS = 10 * 60_000;

/** The roles card's content. */
export function rolesPanel(roles: readonly Role[]): HTMLElement[] {
  return [
    h("h3", { id: "roles-title" }, `Roles (${roles.length})`),
    h(
      "ul",
      { class: "plain" },
      roles.map((role) =>
        h(
          "li",
          {},
          h("strong", {}, role.name),
          " ",
          role.roleClass === "ROLE_CLASS_QUEEN" ? h("span", { class: "badge" }, "queen") : null,
          role.humanSeat ? h("span", { class: "badge human" }, "human seat") : null,
          role.isDefault ? h("span", { class: "badge" }, "default") : null,
          role.canBroadcast ? h("span", { class: "badge" }, "broadcasts") : null,
          role.shortDescription ? h("div", { class: "muted" }, role.shortDescription) : null,
        ),
      ),
    ),
  ];
}

/** The drones card's content: role and posture, seat state (its note, since when), last seen, silent seats highlighted. */
export function dronesPanel(drones: readonly Drone[], seatDroneId: string | undefined): HTMLElement[] {
  const now = Date.now();
  const live = drones.filter((d) => !d.evictedAt);
  return [
    h("h3", { id: "drones-title" }, `Drones (${live.length})`),
    live.length === 0
      ? h("p", { class: "muted" }, "No seats taken yet.")
      : h(
          "table",
          { class: "drones" },
          h("caption", { class: "sr-only" }, "Drones of this cube"),
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", { scope: "col" }, "Drone"),
              h("th", { scope: "col" }, "State"),
              h("th", { scope: "col" }, "Last seen"),
            ),
          ),
          h(
            "tbody",
            {},
            live.map((drone) => {
              const silent =
                (drone.silentPingCount ?? 0) > 0 ||
                (drone.live !== false &&
                  drone.lastSeenAt !== undefined &&
                  now - Date.parse(drone.lastSeenAt) > QUIET_MS);
              return h(
                "tr",
                { class: silent ? "silent" : undefined, "data-drone-id": drone.id },
                h(
                  "td",
                  {},
                  h("span", { class: `dot ${drone.live ? "on" : "off"}`, "aria-hidden": "true" }),
                  h("strong", {}, drone.label || drone.id.slice(0, 8)),
                  seatDroneId === drone.id ? h("span", { class: "badge you" }, "you") : null,
                  h(
                    "div",
                    { class: "muted" },
                    [drone.roleName, drone.posture ? enumLabel(drone.posture, "DRONE_POSTURE_") : ""]
                      .filter(Boolean)
                      .join(" · "),
                  ),
                ),
                seatStateCell(drone),
                h(
                  "td",
                  { class: "last-seen" },
                  time(drone.lastSeenAt),
                  silent
                    ? h(
                        "span",
                        { class: "badge warn" },
                        `silent${drone.silentPingCount ? ` ×${drone.silentPingCount}` : ""}`,
                      )
                    : null,
                ),
              );
            }),
          ),
        ),
  ];
}

/** A drone's seat state cell: the state, its note, and since when (independent of last seen). */
function seatStateCell(drone: Drone): HTMLTableCellElement {
  const view = seatStateView(drone);
  if (!view) return h("td", { class: "seat-state", "data-state": "unset" }, h("span", { class: "muted" }, "not said"));
  return h(
    "td",
    { class: "seat-state", "data-state": view.state },
    h("span", { class: `badge seat-${view.state}` }, view.state),
    view.note ? h("div", { class: "state-note" }, view.note) : null,
    view.changedAt ? h("div", { class: "muted" }, "since ", time(view.changedAt)) : null,
  );
}

/** What an entry's rendering needs from its cube view. */
export interface EntryOptions {
  readonly seatDroneId: string | undefined;
  readonly canWrite: boolean;
  readonly label: (droneId: string | undefined) => string;
  readonly act: (method: EntryAction, entry: Entry) => void;
  /** The entry a reply answers, when it is in view. */
  readonly parent: (entryId: string) => Entry | undefined;
  /** Opens the entry's thread; `reply` focuses the reply form replying to this entry. */
  readonly thread: (entry: Entry, reply: boolean) => void;
  /** The receipts panel's state while it is open for the entry; undefined when closed. */
  readonly receipts: (entryId: string) => ReceiptsState | undefined;
  readonly toggleReceipts: (entry: Entry) => void;
}

/** The actions an entry offers. */
export type EntryAction = "AckEntry" | "ClaimEntry" | "ReleaseClaim" | "TakeOverClaim";

/** One activity entry: author, audience, message, acks, claim, and the seat's actions. */
export function entryItem(entry: Entry, options: EntryOptions): HTMLLIElement {
  const { seatDroneId, label: droneLabel, act } = options;
  const direct = entry.visibility === "VISIBILITY_DIRECT";
  const mine = seatDroneId !== undefined && entry.author?.droneId === seatDroneId;
  const ackedBy = entry.ackedByDroneIds ?? [];
  const acked = seatDroneId !== undefined && ackedBy.includes(seatDroneId);
  const author = entry.author?.label || enumLabel(entry.author?.principalKind, "PRINCIPAL_KIND_");
  const actions = h("div", { class: "actions" });
  if (options.canWrite && !mine) {
    actions.append(
      h(
        "button",
        { type: "button", class: "small", disabled: acked, onclick: () => act("AckEntry", entry) },
        acked ? "Acked" : "Ack",
      ),
    );
  }
  const claim = claimView(entry.claim, droneLabel);
  const holding = seatDroneId !== undefined && entry.claim?.holderDroneId === seatDroneId;
  if (options.canWrite && !claim) {
    actions.append(h("button", { type: "button", class: "small", onclick: () => act("ClaimEntry", entry) }, "Claim"));
  } else if (holding) {
    actions.append(
      h("button", { type: "button", class: "small", onclick: () => act("ReleaseClaim", entry) }, "Release"),
    );
  } else if (options.canWrite && claim?.state === "stale") {
    actions.append(
      h("button", { type: "button", class: "small", onclick: () => act("TakeOverClaim", entry) }, "Take over"),
    );
  }
  if (options.canWrite && !entry.seatState) {
    actions.append(
      h(
        "button",
        { type: "button", class: "small", onclick: () => options.thread(entry, true) },
        "Reply",
        h("span", { class: "sr-only" }, ` to ${author}`),
      ),
    );
  }
  const receipts = options.receipts(entry.id);
  if (mayListReceipts(entry, seatDroneId)) {
    actions.append(
      h(
        "button",
        {
          type: "button",
          class: "small",
          "aria-expanded": receipts ? "true" : "false",
          "aria-controls": `receipts-${entry.id}`,
          onclick: () => options.toggleReceipts(entry),
        },
        "Receipts",
      ),
    );
  }
  const parent = entry.replyToEntryId ? options.parent(entry.replyToEntryId) : undefined;
  const replies = entry.replyCount ?? 0;
  if (entry.seatState) {
    // A seat state change is a line of the log, not a message to act on.
    return h(
      "li",
      {
        class: "entry seat-change",
        "data-entry-id": entry.id,
        "aria-label": `${author} ${seatChangeText(entry.seatState)}`,
      },
      h(
        "div",
        { class: "meta" },
        h("strong", { class: "author" }, author),
        h("span", { class: "badge state" }, seatChangeText(entry.seatState)),
        time(entry.createdAt, "when"),
      ),
    );
  }
  return h(
    "li",
    {
      class: `entry${direct ? " direct" : ""}${mine ? " mine" : ""}`,
      "data-entry-id": entry.id,
      "data-thread": entry.threadRootEntryId || undefined,
      "aria-label": `${author}${entry.question ? " asks" : ""}: ${entry.message ?? ""}`,
    },
    entry.replyToEntryId
      ? h(
          "button",
          { type: "button", class: "in-reply link", onclick: () => options.thread(entry, false) },
          "↩ reply to ",
          parent
            ? `${parent.author?.label || droneLabel(parent.author?.droneId)}: “${preview(parent.message, 60)}”`
            : "an earlier entry",
        )
      : null,
    h(
      "div",
      { class: "meta" },
      h("strong", { class: "author" }, author),
      entry.question ? h("span", { class: "badge question" }, "question to humans") : null,
      direct
        ? h("span", { class: "badge direct" }, `direct → ${(entry.recipientDroneIds ?? []).map(droneLabel).join(", ")}`)
        : h("span", { class: "badge" }, "broadcast"),
      entry.kind ? h("span", { class: "badge kind" }, entry.kind) : null,
      time(entry.createdAt, "when"),
    ),
    h("p", { class: "message" }, entry.message ?? ""),
    h(
      "div",
      { class: "footer" },
      ackedBy.length > 0 || (entry.ackCount ?? 0) > 0
        ? h(
            "span",
            { class: "acks", title: ackedBy.map(droneLabel).join(", ") },
            `✓ ${Math.max(entry.ackCount ?? 0, ackedBy.length)} ack${Math.max(entry.ackCount ?? 0, ackedBy.length) === 1 ? "" : "s"}`,
          )
        : null,
      claim
        ? h(
            "span",
            {
              class: `claim claim-${claim.state}`,
              "data-claim-state": claim.state,
              "data-fence": claim.fence || undefined,
            },
            `⚑ claimed by ${claim.holder}`,
            claim.fence ? ` · fence ${claim.fence}` : "",
            " · ",
            h("span", { class: `badge claim-${claim.state}` }, claim.state),
            claim.staleAt ? [claim.state === "stale" ? " since " : " stale ", time(claim.staleAt)] : null,
          )
        : null,
      replies > 0
        ? h(
            "button",
            { type: "button", class: "small link replies", onclick: () => options.thread(entry, false) },
            repliesText(replies),
            h("span", { class: "sr-only" }, ` to ${author}`),
          )
        : null,
      actions,
    ),
    receipts ? receiptsList(entry.id, receipts) : null,
  );
}

/** What the decisions card needs. */
export interface DecisionsOptions {
  readonly cubeId: string;
  readonly readToken: string;
  readonly writeToken: string;
  readonly canWrite: boolean;
  readonly onRecorded: () => void;
  readonly onError: (error: unknown) => void;
}

/** Fills the decisions card: a form to record one (with WRITE) and the newest 20. */
export async function decisionsCard(box: HTMLElement, options: DecisionsOptions): Promise<void> {
  const heading = h("h3", { id: "decisions-title" }, "Decisions");
  try {
    const { decisions = [] } = await rpc<{ decisions?: Decision[] }>(
      `${CUBE}.ActivityService/ListDecisions`,
      { cubeId: options.cubeId, pageSize: 20 },
      options.readToken,
    );
    replace(
      box,
      heading,
      options.canWrite ? decisionForm(options) : null,
      decisions.length === 0
        ? h("p", { class: "muted" }, "No decisions recorded.")
        : h(
            "ul",
            { class: "plain" },
            decisions.map((d) =>
              h(
                "li",
                {},
                h("strong", {}, d.title ?? ""),
                h("div", { class: "muted" }, d.author?.label ?? "", " · ", time(d.createdAt)),
                d.rationale ? h("p", { class: "rationale" }, d.rationale) : null,
              ),
            ),
          ),
    );
  } catch (e) {
    replace(box, heading, h("p", { class: "muted" }, (e as Error).message ?? String(e)));
  }
}

function decisionForm(options: DecisionsOptions): HTMLElement {
  const title = h("input", { id: "decision-title", name: "title", required: true, maxlength: 500 });
  const rationale = h("textarea", { id: "decision-rationale", name: "rationale", rows: 2 });
  return h(
    "details",
    { class: "decide" },
    h("summary", {}, "Record a decision"),
    h(
      "form",
      {
        class: "stack-form",
        onsubmit: async (event: Event) => {
          event.preventDefault();
          try {
            await rpc(
              `${CUBE}.ActivityService/RecordDecision`,
              { cubeId: options.cubeId, title: title.value, rationale: rationale.value },
              options.writeToken,
            );
            options.onRecorded();
          } catch (e) {
            options.onError(e);
          }
        },
      },
      h("label", { for: "decision-title" }, "Decision"),
      title,
      h("label", { for: "decision-rationale" }, "Rationale"),
      rationale,
      h("button", { type: "submit" }, "Record"),
    ),
  );
}
