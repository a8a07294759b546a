import { ApiError, CUBE, type Drone, type Entry, type Question, rpc } from "./api";
import { openQuestions, questionCountText, replyPlan, touchesQuestions } from "./coordination";
import { h, time } from "./dom";

/** What the questions card needs from its cube view. */
export interface QuestionsOptions {
  readonly cubeId: string;
  /** The token the list is read with (the signed-in one: a user sees every question). */
  readonly readToken: string;
  /** The token answers go out with (the seat's session, else the signed-in token). */
  readonly writeToken: () => string;
  readonly seatDroneId: () => string | undefined;
  readonly drones: () => readonly Drone[];
  /**
   * Whether the viewer's reply would answer (the cube counts a user's or a human seat's first
   * reply): false for another drone's seat or a client not seated, who can still reply in the thread.
   */
  readonly mayAnswer: () => boolean;
  readonly label: (droneId: string | undefined) => string;
  readonly openThread: (entryId: string) => void;
  readonly answered: (answer: Entry) => void;
  readonly announce: (message: string) => void;
}

/**
 * The cube's open questions to its humans (`ListQuestions`), newest first, each answerable inline:
 * the answer is a reply to the question (`replyPlan`: to the question's audience). The list is
 * read again when an entry on the stream asks or replies into an open question, so an answer given
 * anywhere (another console, a human-seat agent) takes the question off here too. Each question's
 * row is kept across refreshes, so a half-typed answer is never lost.
 */
export function questionsCard(options: QuestionsOptions) {
  let open: Question[] = [];
  let loaded = false;
  let unavailable = "";
  let pending: ReturnType<typeof setTimeout> | undefined;
  const rows = new Map<string, HTMLLIElement>();
  const count = h("span", { class: "badge question-count", "aria-live": "polite" });
  const list = h("ul", { class: "plain questions", "aria-labelledby": "questions-title" });
  const status = h("p", { class: "muted" }, "Loading questions…");
  const error = h("p", { class: "error", role: "alert" });
  const box = h(
    "section",
    { class: "card questions-card", "aria-labelledby": "questions-title", id: "questions" },
    h("div", { class: "title-row" }, h("h3", { id: "questions-title", tabindex: "-1" }, "Questions to answer"), count),
    error,
    status,
    list,
  );

  const row = (question: Question): HTMLLIElement => {
    const known = rows.get(question.entry.id);
    if (known) return known;
    const entry = question.entry;
    const asker = entry.author?.label || options.label(entry.author?.droneId);
    const inputId = `answer-${entry.id}`;
    const answer = h("textarea", { id: inputId, name: "answer", rows: 2, required: true, maxlength: 32768 });
    const hint = h("p", { class: "help", id: `${inputId}-to` });
    answer.setAttribute("aria-describedby", hint.id);
    const send = h("button", { type: "submit", class: "primary small" }, "Send answer");
    const plan = () => replyPlan(options.cubeId, entry, answer.value, options.seatDroneId(), options.drones());
    const form = h(
      "form",
      { class: "answer" },
      h("label", { for: inputId }, `Answer ${asker}`),
      answer,
      hint,
      h("div", { class: "row" }, send),
    );
    const showHint = () => {
      hint.textContent = `Your answer goes to ${plan().audience}.`;
    };
    answer.addEventListener("focus", showHint);
    answer.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!answer.value.trim()) return;
      send.disabled = true;
      try {
        const posted = await rpc<{ entry: Entry }>(
          `${CUBE}.ActivityService/AppendEntry`,
          plan().body,
          options.writeToken(),
        );
        error.textContent = "";
        const at = open.findIndex((q) => q.entry.id === entry.id);
        open = open.filter((q) => q.entry.id !== entry.id);
        render();
        // Keyboard users go on with the next question (or land on the card when none is left).
        const next = open[Math.min(at, open.length - 1)];
        const nextBox = next ? rows.get(next.entry.id)?.querySelector("textarea") : undefined;
        (nextBox ?? box.querySelector<HTMLElement>("#questions-title"))?.focus();
        options.answered(posted.entry);
        options.announce(`Answer sent to ${asker}`);
        schedule();
      } catch (e) {
        error.textContent = e instanceof ApiError ? `${e.message} (${e.code})` : (e as Error).message;
      } finally {
        send.disabled = false;
      }
    });
    showHint();
    const li = h(
      "li",
      { class: "question-item", "data-question-id": entry.id },
      h(
        "div",
        { class: "meta" },
        h("strong", { class: "author" }, asker),
        h("span", { class: "badge question" }, "asks"),
        time(entry.createdAt, "when"),
      ),
      h("p", { class: "message" }, entry.message ?? ""),
      h(
        "button",
        { type: "button", class: "small link", onclick: () => options.openThread(entry.id) },
        "Open thread",
        h("span", { class: "sr-only" }, ` of ${asker}'s question`),
      ),
      options.mayAnswer()
        ? form
        : h("p", { class: "help" }, "Only a user or a human seat answers questions; reply in the thread instead."),
    );
    rows.set(entry.id, li);
    return li;
  };

  const render = () => {
    const ids = new Set(open.map((q) => q.entry.id));
    for (const id of [...rows.keys()]) if (!ids.has(id)) rows.delete(id);
    count.textContent = loaded ? questionCountText(open.length) : "";
    count.hidden = !loaded || unavailable !== "";
    box.dataset.open = String(open.length);
    status.textContent =
      unavailable || (loaded && open.length === 0 ? "No open questions." : loaded ? "" : status.textContent);
    status.hidden = status.textContent === "";
    // Rows are moved only where the order changed, so a focused answer box keeps its focus.
    const wanted = open.map(row);
    wanted.forEach((node, i) => {
      if (list.children[i] !== node) list.insertBefore(node, list.children[i] ?? null);
    });
    while (list.children.length > wanted.length) list.lastElementChild?.remove();
  };

  const refresh = async () => {
    try {
      const answer = await rpc<{ questions?: Question[] }>(
        `${CUBE}.ActivityService/ListQuestions`,
        { cubeId: options.cubeId, pageSize: 100 },
        options.readToken,
      );
      open = openQuestions(answer.questions ?? []);
      loaded = true;
      unavailable = "";
      error.textContent = "";
    } catch (e) {
      loaded = true;
      if (e instanceof ApiError && e.code === "unimplemented")
        unavailable = "This cube service does not list questions yet.";
      else error.textContent = (e as Error).message;
    }
    render();
  };

  /** Reads the list again soon (one read for a burst of entries). */
  const schedule = () => {
    if (pending) return;
    pending = setTimeout(() => {
      pending = undefined;
      void refresh();
    }, 250);
  };

  return {
    box,
    refresh,
    /** An entry from the stream or a post: re-reads the list when it may change it. */
    onEntry(entry: Entry) {
      if (touchesQuestions(entry, open)) schedule();
    },
    /** Builds every row again (the viewer took or left a seat: who may answer changed). */
    rebuild() {
      rows.clear();
      render();
    },
    dispose() {
      if (pending) clearTimeout(pending);
    },
  };
}
