import {
  ApiError,
  CUBE,
  type Cube,
  type Drone,
  type Entry,
  type Notification,
  type Receipt,
  type Role,
  rpc,
  type Seat,
  session,
  tokenKind,
} from "./api";
import { buildComposer, noticesCard } from "./composer";
import { applySeatChange, countReply } from "./coordination";
import { enumLabel, h, replace } from "./dom";
import { type EventStream, openEventStream, type StreamState } from "./events";
import { decisionsCard, dronesPanel, type EntryAction, entryItem, rolesPanel } from "./panels";
import { questionsCard } from "./questions";
import { type ReceiptsState, receiptsList } from "./receipts";
import { threadPanel } from "./threads";

const MAX_ENTRIES = 1000;

export interface CubeViewContext {
  readonly token: string;
  readonly setStreamState: (state: StreamState, detail: string) => void;
  readonly announce: (message: string) => void;
}

/**
 * One open cube: directive, open questions to its humans, roles, drones (with their seat state),
 * the live activity log with threads, receipts and claim leases, and the human seat.
 */
export function cubeView(cubeId: string, context: CubeViewContext): { element: HTMLElement; dispose(): void } {
  const signedIn = context.token;
  let seat: Seat | undefined = session.seat(cubeId);
  let cube: Cube | undefined;
  let roles: Role[] = [];
  let drones: Drone[] = [];
  const entries = new Map<string, Entry>();
  /** Receipts panels open on direct entries, by entry id. */
  const receipts = new Map<string, ReceiptsState>();
  let stream: EventStream | undefined;
  let disposed = false;
  const actor = () => seat?.sessionToken ?? signedIn;

  const header = h("header", { class: "cube-header" }, h("h2", {}, "Loading cube…"));
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const seatBox = h("section", { class: "card seat", "aria-labelledby": "seat-title" });
  const rolesBox = h("section", { class: "card", "aria-labelledby": "roles-title" });
  const dronesBox = h("section", { class: "card", "aria-labelledby": "drones-title" });
  const decisionsBox = h("section", { class: "card", "aria-labelledby": "decisions-title" });
  const notices = noticesCard();
  const log = h("ol", { class: "log", id: "activity" });
  const questions = questionsCard({
    cubeId,
    readToken: signedIn,
    writeToken: () => actor(),
    seatDroneId: () => seat?.droneId,
    drones: () => drones,
    mayAnswer: () =>
      canWrite() &&
      (seat ? roles.some((r) => r.name === seat?.roleName && r.humanSeat) : tokenKind(signedIn) === "user"),
    label: (id) => droneLabel(id),
    openThread: (id) => openThread(id),
    answered: (entry) => {
      clearError();
      arrived(entry);
    },
    announce: context.announce,
  });
  const thread = threadPanel({
    cubeId,
    readToken: () => actor(),
    writeToken: () => actor(),
    seatDroneId: () => seat?.droneId,
    drones: () => drones,
    canWrite: () => canWrite(),
    label: (id) => droneLabel(id),
    posted: (entry) => {
      clearError();
      arrived(entry);
    },
    announce: context.announce,
  });
  const composer = buildComposer({
    cubeId,
    actor: () => actor(),
    posted: (entry) => {
      clearError();
      arrived(entry);
      context.announce("Posted");
    },
    failed: (e) => showError(e),
  });
  const element = h(
    "div",
    { class: "cube-view" },
    header,
    error,
    questions.box,
    h(
      "div",
      { class: "cube-grid" },
      h(
        "div",
        { class: "main-column" },
        thread.box,
        h(
          "section",
          { class: "card activity", "aria-labelledby": "activity-title" },
          h("h3", { id: "activity-title" }, "Activity"),
          h("div", { role: "log", "aria-live": "polite", "aria-label": "Activity" }, log),
          composer.form,
        ),
      ),
      h("aside", { class: "side" }, seatBox, notices.box, dronesBox, rolesBox, decisionsBox),
    ),
  );

  const showError = (e: unknown) => {
    error.hidden = false;
    error.textContent = e instanceof ApiError ? `${e.message} (${e.code})` : String((e as Error).message ?? e);
  };
  const clearError = () => {
    error.hidden = true;
    error.textContent = "";
  };

  const droneLabel = (id: string | undefined) => {
    if (!id) return "someone";
    if (seat && id === seat.droneId) return `${seat.label} (you)`;
    return drones.find((d) => d.id === id)?.label || id.slice(0, 8);
  };

  const canWrite = () => cube?.callerAccess === "CUBE_ACCESS_WRITE" || cube?.callerAccess === "CUBE_ACCESS_MANAGE";

  function renderEntry(entry: Entry): HTMLLIElement {
    return entryItem(entry, {
      seatDroneId: seat?.droneId,
      canWrite: canWrite(),
      label: droneLabel,
      act,
      parent: (id) => entries.get(id),
      thread: (target, reply) => thread.open(target, reply),
      receipts: (id) => receipts.get(id),
      toggleReceipts,
    });
  }

  /** Opens the thread of an entry in view (or of any entry by id: ReadThread finds its root). */
  function openThread(entryId: string) {
    thread.open(entries.get(entryId) ?? { id: entryId });
  }

  /**
   * An entry new to the view (from the stream, or posted here): counted into its thread's root,
   * joined to an open thread, checked against the open questions, and a seat state change applied
   * to the drones list.
   */
  function arrived(entry: Entry) {
    if (!entries.has(entry.id)) {
      const root = countReply(entries, entry);
      if (root) upsert(root);
    }
    upsert(entry);
    thread.onEntry(entries.get(entry.id) ?? entry);
    questions.onEntry(entry);
    if (entry.seatState) {
      drones = applySeatChange(drones, entry);
      renderDrones();
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
    log.querySelector<HTMLButtonElement>(`[data-entry-id="${CSS.escape(entry.id)}"] [aria-controls]`)?.focus();
  }

  function upsert(entry: Entry) {
    const known = entries.get(entry.id);
    const merged = known ? { ...known, ...entry } : entry;
    entries.set(entry.id, merged);
    const node = renderEntry(merged);
    const existing = log.querySelector(`[data-entry-id="${CSS.escape(entry.id)}"]`);
    if (existing) existing.replaceWith(node);
    else {
      const stick = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
      log.append(node);
      while (log.children.length > MAX_ENTRIES) {
        const first = log.firstElementChild as HTMLElement;
        entries.delete(first.dataset.entryId ?? "");
        first.remove();
      }
      if (stick) log.scrollTop = log.scrollHeight;
    }
  }

  function applyNotification(notification: Notification) {
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
          claim: { ...entry.claim, state: "CLAIM_STATE_STALE", staleAt: notification.createdAt ?? entry.claim.staleAt },
        });
      } else if (notification.kind === "NOTIFICATION_KIND_TAKEOVER") {
        const fence = entry.claim?.fence ? String(BigInt(entry.claim.fence) + 1n) : undefined;
        upsert({
          ...entry,
          claim: { holderDroneId: notification.actorDroneId ?? "", fence, state: "CLAIM_STATE_HELD" },
        });
      }
    }
    listNotification(notification);
    if (notification.text) context.announce(notification.text);
  }

  function listNotification(notification: Notification) {
    notices.add(notification);
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
      clearError();
      if (answer.entry)
        upsert(method === "ReleaseClaim" && !answer.entry.claim ? { ...answer.entry, claim: {} } : answer.entry);
      else if (method === "TakeOverClaim") upsert({ ...entry, claim: answer.claim ?? {} });
      if (answer.outcome === "CLAIM_OUTCOME_ALREADY_CLAIMED") context.announce("Someone else holds that claim");
      if (answer.outcome === "TAKE_OVER_OUTCOME_TAKEN_OVER") context.announce("You hold the claim now");
      else if (answer.outcome?.startsWith("TAKE_OVER_OUTCOME_"))
        context.announce(`Not taken over: ${enumLabel(answer.outcome, "TAKE_OVER_OUTCOME_")}`);
    } catch (e) {
      showError(e);
    }
  }

  function renderHeader() {
    if (!cube) return;
    replace(
      header,
      h(
        "div",
        { class: "title-row" },
        h("h2", {}, cube.name),
        h("span", { class: "badge access" }, `${enumLabel(cube.callerAccess, "CUBE_ACCESS_")} access`),
        cube.callerAccess === "CUBE_ACCESS_MANAGE"
          ? h("a", { href: `#/cubes/${encodeURIComponent(cube.id)}/manage` }, "Manage cube")
          : null,
      ),
      h("h3", { class: "label" }, "Directive"),
      cube.directive ? h("p", { class: "directive" }, cube.directive) : h("p", { class: "muted" }, "No directive yet."),
    );
  }

  function renderRoles() {
    replace(rolesBox, ...rolesPanel(roles));
  }

  function renderDrones() {
    replace(dronesBox, ...dronesPanel(drones, seat?.droneId));
    const live = drones.filter((d) => !d.evictedAt);
    const selected = composer.to.value;
    replace(
      composer.to,
      h("option", { value: "" }, "Everyone (broadcast)"),
      live
        .filter((d) => d.live && d.id !== seat?.droneId)
        .map((d) => h("option", { value: d.id }, `${d.label || d.id.slice(0, 8)} only (direct)`)),
    );
    composer.to.value = [...composer.to.options].some((o) => o.value === selected) ? selected : "";
  }

  async function renderDecisions() {
    await decisionsCard(decisionsBox, {
      cubeId,
      readToken: signedIn,
      writeToken: actor(),
      canWrite: canWrite(),
      onRecorded: () => {
        clearError();
        context.announce("Decision recorded");
        void renderDecisions();
      },
      onError: showError,
    });
  }

  function renderSeat() {
    const kind = tokenKind(signedIn);
    if (seat) {
      replace(
        seatBox,
        h("h3", { id: "seat-title" }, "Your seat"),
        h("p", {}, "You are ", h("strong", {}, seat.label), ` in role ${seat.roleName}.`),
        h("p", { class: "muted" }, "You post, ack and claim as this drone, and see what it sees."),
        h("button", { type: "button", onclick: () => leaveSeat() }, "Leave seat"),
      );
    } else if (kind === "client") {
      const ordered = [...roles].sort((a, b) => Number(b.humanSeat ?? false) - Number(a.humanSeat ?? false));
      const select = h(
        "select",
        { id: "seat-role" },
        ordered.map((r) => h("option", { value: r.id }, `${r.name}${r.humanSeat ? " (human seat)" : ""}`)),
      );
      replace(
        seatBox,
        h("h3", { id: "seat-title" }, "Take a seat"),
        h("p", { class: "muted" }, "Join the cube as a drone to post, ack and claim as a member of the team."),
        h(
          "form",
          { class: "row", onsubmit: (event: Event) => takeSeat(event, select.value) },
          h("label", { for: "seat-role" }, "Role"),
          select,
          h("button", { type: "submit", class: "primary" }, "Take seat"),
        ),
      );
    } else {
      replace(
        seatBox,
        h("h3", { id: "seat-title" }, "Viewing as a user"),
        h(
          "p",
          { class: "muted" },
          "You see every entry of the cube. Sign in with a client token to take a human seat.",
        ),
      );
    }
    composer.form.hidden = !canWrite();
  }

  async function takeSeat(event: Event, roleId: string) {
    event.preventDefault();
    try {
      const answer = await rpc<{ drone: Drone; sessionToken?: string }>(
        `${CUBE}.CubeService/AttachSeat`,
        { cubeId, roleId, hostname: "web console" },
        signedIn,
      );
      if (!answer.sessionToken) throw new Error("the cube did not issue a session token");
      seat = {
        droneId: answer.drone.id,
        label: answer.drone.label || "you",
        roleName: answer.drone.roleName ?? "",
        sessionToken: answer.sessionToken,
      };
      session.setSeat(cubeId, seat);
      clearError();
      context.announce(`Seated as ${seat.label}`);
      renderSeat();
      questions.rebuild();
      await refreshDrones();
      restartStream();
      composer.message.focus();
    } catch (e) {
      showError(e);
    }
  }

  function dropSeat(message: string) {
    const stale = stream;
    queueMicrotask(() => {
      if (stream !== stale || !seat) return;
      leaveSeat();
      showError(message);
    });
  }

  function leaveSeat() {
    seat = undefined;
    session.setSeat(cubeId, undefined);
    renderSeat();
    questions.rebuild();
    restartStream();
  }

  async function refreshDrones() {
    try {
      const answer = await rpc<{ drones?: Drone[] }>(
        `${CUBE}.CubeService/ListDrones`,
        { cubeId, pageSize: 500 },
        signedIn,
      );
      drones = answer.drones ?? [];
      renderDrones();
    } catch (e) {
      showError(e);
    }
  }

  /** Reads the retained log (as the current viewer) and returns the cursor to stream from. */
  async function backfill(): Promise<string> {
    let cursor = "";
    for (let page = 0; page < 20; page++) {
      const answer = await rpc<{
        items?: { entry?: Entry; notification?: Notification }[];
        nextCursor?: string;
        hasMore?: boolean;
      }>(`${CUBE}.ActivityService/ReadActivity`, { cubeId, cursor, pageSize: 500 }, actor());
      for (const item of answer.items ?? []) {
        // Entries come with their current acks and claim; past notifications are only listed.
        if (item.entry) upsert(item.entry);
        else if (item.notification) listNotification(item.notification);
      }
      cursor = answer.nextCursor ?? cursor;
      if (!answer.hasMore) break;
    }
    return cursor;
  }

  function startStream(after: string) {
    stream = openEventStream({
      path: `/v1/cubes/${encodeURIComponent(cubeId)}/events`,
      token: actor,
      lastEventId: after,
      readyEvents: ["ready"],
      terminalEvents: ["access_revoked"],
      onState: (state, detail) => {
        context.setStreamState(state, detail);
        // A seat session that expired or was revoked: fall back to the signed-in token.
        if (state === "ended" && seat) dropSeat(`Your seat ended: ${detail}`);
      },
      onEvent: (type, data) => {
        if (type === "entry") {
          arrived(data as Entry);
          const author = (data as Entry).author?.droneId;
          if (author && !drones.some((d) => d.id === author)) void refreshDrones();
        } else if (type === "notification") applyNotification(data as Notification);
        else if (type === "access_revoked") {
          const reason = (data as { reason?: string }).reason ?? "access revoked";
          context.setStreamState("ended", reason);
          if (seat) dropSeat(`Your seat ended: ${reason}`);
        }
      },
    });
  }

  function restartStream() {
    const after = stream?.lastEventId() ?? "";
    stream?.close();
    log.replaceChildren();
    entries.clear();
    notices.clear();
    void backfill().then(
      (cursor) => !disposed && startStream(cursor || after),
      (e) => {
        if (seat && e instanceof ApiError && e.code === "unauthenticated") dropSeat("Your seat session ended");
        else showError(e);
      },
    );
  }

  // Drones and questions are read again every 15 s (a seat's stream does not carry every
  // answer); open receipts panels every 5 s while they are open.
  const timer = setInterval(() => {
    void refreshDrones();
    void questions.refresh();
  }, 15_000);
  const receiptsTimer = setInterval(() => {
    for (const id of receipts.keys()) void loadReceipts(id);
  }, 5_000);

  void (async () => {
    try {
      const [got, roleList] = await Promise.all([
        rpc<{ cube: Cube }>(`${CUBE}.CubeService/GetCube`, { cubeId }, signedIn),
        rpc<{ roles?: Role[] }>(`${CUBE}.CubeService/ListRoles`, { cubeId }, signedIn),
      ]);
      cube = got.cube;
      roles = roleList.roles ?? [];
      document.title = `${cube.name} · Unimatrix`;
      renderHeader();
      renderRoles();
      renderSeat();
      await refreshDrones();
      void renderDecisions();
      void questions.refresh();
      if (seat) {
        restartStream();
        return;
      }
      const cursor = await backfill();
      if (!disposed) startStream(cursor);
    } catch (e) {
      showError(e);
    }
  })();

  return {
    element,
    dispose() {
      disposed = true;
      clearInterval(timer);
      clearInterval(receiptsTimer);
      questions.dispose();
      stream?.close();
    },
  };
}
