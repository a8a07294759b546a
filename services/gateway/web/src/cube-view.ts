import {
  ApiError,
  CUBE,
  type Cube,
  type Drone,
  type Entry,
  type Notification,
  type Role,
  rpc,
  type Seat,
  session,
  tokenKind,
} from "./api";
import { buildComposer, noticesCard } from "./composer";
import { enumLabel, h, replace } from "./dom";
import { type EventStream, openEventStream, type StreamState } from "./events";
import { decisionsCard, dronesPanel, entryItem, rolesPanel } from "./panels";

const MAX_ENTRIES = 1000;

export interface CubeViewContext {
  readonly token: string;
  readonly setStreamState: (state: StreamState, detail: string) => void;
  readonly announce: (message: string) => void;
}

/** One open cube: directive, roles, drones, the live activity log, and the human seat. */
export function cubeView(cubeId: string, context: CubeViewContext): { element: HTMLElement; dispose(): void } {
  const signedIn = context.token;
  let seat: Seat | undefined = session.seat(cubeId);
  let cube: Cube | undefined;
  let roles: Role[] = [];
  let drones: Drone[] = [];
  const entries = new Map<string, Entry>();
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
  const composer = buildComposer({
    cubeId,
    actor: () => actor(),
    posted: (entry) => {
      clearError();
      upsert(entry);
      context.announce("Posted");
    },
    failed: (e) => showError(e),
  });
  const element = h(
    "div",
    { class: "cube-view" },
    header,
    error,
    h(
      "div",
      { class: "cube-grid" },
      h(
        "section",
        { class: "card activity", "aria-labelledby": "activity-title" },
        h("h3", { id: "activity-title" }, "Activity"),
        h("div", { role: "log", "aria-live": "polite", "aria-label": "Activity" }, log),
        composer.form,
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
    return entryItem(entry, { seatDroneId: seat?.droneId, canWrite: canWrite(), label: droneLabel, act });
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
        upsert({ ...entry, claim: { holderDroneId: notification.actorDroneId ?? "" } });
      } else if (notification.kind === "NOTIFICATION_KIND_RELEASE") {
        upsert({ ...entry, claim: {} });
      }
    }
    listNotification(notification);
    if (notification.text) context.announce(notification.text);
  }

  function listNotification(notification: Notification) {
    notices.add(notification);
  }

  async function act(method: "AckEntry" | "ClaimEntry" | "ReleaseClaim", entry: Entry) {
    try {
      const answer = await rpc<{ entry?: Entry; outcome?: string }>(
        `${CUBE}.ActivityService/${method}`,
        { cubeId, entryId: entry.id },
        actor(),
      );
      clearError();
      if (answer.entry)
        upsert(method === "ReleaseClaim" && !answer.entry.claim ? { ...answer.entry, claim: {} } : answer.entry);
      if (answer.outcome === "CLAIM_OUTCOME_ALREADY_CLAIMED") context.announce("Someone else holds that claim");
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
          upsert(data as Entry);
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

  const timer = setInterval(() => void refreshDrones(), 15_000);

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
      stream?.close();
    },
  };
}
