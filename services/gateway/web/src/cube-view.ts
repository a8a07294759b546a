import { activityFeed } from "./activity-feed";
import { activityLog } from "./activity-log";
import { ApiError, CUBE, type Cube, type Drone, type Entry, type Role, rpc, tokenKind } from "./api";
import { buildComposer, noticesCard } from "./composer";
import { applySeatChange } from "./coordination";
import { enumLabel, h, replace } from "./dom";
import type { StreamState } from "./events";
import { decisionsCard, dronesPanel, rolesPanel } from "./panels";
import { questionsCard } from "./questions";
import { seatPanel } from "./seat-panel";
import { threadPanel } from "./threads";

export interface CubeViewContext {
  readonly token: string;
  readonly setStreamState: (state: StreamState, detail: string) => void;
  readonly announce: (message: string) => void;
}

/**
 * One open cube: directive, open questions to its humans, roles, drones (with their seat state),
 * the live activity log with threads, receipts and claim leases, and the human seat. This file
 * composes the cards and keeps what they share (the cube, its roles and drones, the seat's token).
 */
export function cubeView(cubeId: string, context: CubeViewContext): { element: HTMLElement; dispose(): void } {
  const signedIn = context.token;
  let cube: Cube | undefined;
  let roles: Role[] = [];
  let drones: Drone[] = [];
  const seats = seatPanel({
    cubeId,
    signedIn,
    roles: () => roles,
    seated: async () => {
      questions.rebuild();
      await refreshDrones();
      feed.restart();
      composer.message.focus();
    },
    left: () => {
      questions.rebuild();
      feed.restart();
    },
    announce: context.announce,
    failed: (e) => showError(e),
    clearError: () => clearError(),
  });
  const seatDroneId = () => seats.current()?.droneId;
  const actor = () => seats.current()?.sessionToken ?? signedIn;

  const header = h("header", { class: "cube-header" }, h("h2", {}, "Loading cube…"));
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const rolesBox = h("section", { class: "card", "aria-labelledby": "roles-title" });
  const dronesBox = h("section", { class: "card", "aria-labelledby": "drones-title" });
  const decisionsBox = h("section", { class: "card", "aria-labelledby": "decisions-title" });
  const notices = noticesCard();
  const questions = questionsCard({
    cubeId,
    readToken: signedIn,
    writeToken: () => actor(),
    seatDroneId,
    drones: () => drones,
    mayAnswer: () => {
      const seat = seats.current();
      return (
        canWrite() &&
        (seat ? roles.some((r) => r.name === seat.roleName && r.humanSeat) : tokenKind(signedIn) === "user")
      );
    },
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
    seatDroneId,
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
  const log = activityLog({
    cubeId,
    actor: () => actor(),
    seatDroneId,
    canWrite: () => canWrite(),
    label: (id) => droneLabel(id),
    openThread: (target, reply) => thread.open(target, reply),
    notices,
    announce: context.announce,
    showError: (e) => showError(e),
    clearError: () => clearError(),
  });
  const feed = activityFeed({
    cubeId,
    actor,
    log,
    notices,
    entry: (entry) => {
      arrived(entry);
      const author = entry.author?.droneId;
      if (author && !drones.some((d) => d.id === author)) void refreshDrones();
    },
    notification: (notification) => log.applyNotification(notification),
    seated: () => seats.current() !== undefined,
    seatEnded: (message) => {
      seats.leave();
      showError(message);
    },
    setStreamState: context.setStreamState,
    showError: (e) => showError(e),
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
          h("div", { role: "log", "aria-live": "polite", "aria-label": "Activity" }, log.list),
          composer.form,
        ),
      ),
      h("aside", { class: "side" }, seats.box, notices.box, dronesBox, rolesBox, decisionsBox),
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
    const seat = seats.current();
    if (seat && id === seat.droneId) return `${seat.label} (you)`;
    return drones.find((d) => d.id === id)?.label || id.slice(0, 8);
  };

  const canWrite = () => cube?.callerAccess === "CUBE_ACCESS_WRITE" || cube?.callerAccess === "CUBE_ACCESS_MANAGE";

  /** Opens the thread of an entry in view (or of any entry by id: ReadThread finds its root). */
  function openThread(entryId: string) {
    thread.open(log.get(entryId) ?? { id: entryId });
  }

  /**
   * An entry new to the view (from the stream, or posted here): counted into its thread's root,
   * joined to an open thread, checked against the open questions, and a seat state change applied
   * to the drones list.
   */
  function arrived(entry: Entry) {
    thread.onEntry(log.add(entry));
    questions.onEntry(entry);
    if (entry.seatState) {
      drones = applySeatChange(drones, entry);
      renderDrones();
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
    replace(dronesBox, ...dronesPanel(drones, seatDroneId()));
    const live = drones.filter((d) => !d.evictedAt);
    const selected = composer.to.value;
    replace(
      composer.to,
      h("option", { value: "" }, "Everyone (broadcast)"),
      live
        .filter((d) => d.live && d.id !== seatDroneId())
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

  // Drones and questions are read again every 15 s (a seat's stream does not carry every
  // answer); open receipts panels every 5 s while they are open.
  const timer = setInterval(() => {
    void refreshDrones();
    void questions.refresh();
  }, 15_000);
  const receiptsTimer = setInterval(() => log.refreshReceipts(), 5_000);

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
      seats.render();
      composer.form.hidden = !canWrite();
      await refreshDrones();
      void renderDecisions();
      void questions.refresh();
      if (seats.current()) {
        feed.restart();
        return;
      }
      await feed.open();
    } catch (e) {
      showError(e);
    }
  })();

  return {
    element,
    dispose() {
      clearInterval(timer);
      clearInterval(receiptsTimer);
      questions.dispose();
      feed.dispose();
    },
  };
}
