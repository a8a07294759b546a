import { ApiError, CUBE, type Drone, type Entry, rpc } from "./api";
import { preview, replyPlan } from "./coordination";
import { enumLabel, h, replace, time } from "./dom";

/** What the thread panel needs from its cube view. */
export interface ThreadOptions {
  readonly cubeId: string;
  /** The token the thread is read with (the seat's, so a seat sees what it may see). */
  readonly readToken: () => string;
  readonly writeToken: () => string;
  readonly seatDroneId: () => string | undefined;
  readonly drones: () => readonly Drone[];
  readonly canWrite: () => boolean;
  readonly label: (droneId: string | undefined) => string;
  readonly posted: (entry: Entry) => void;
  readonly announce: (message: string) => void;
}

/**
 * One thread, read with `ReadThread` (root, then replies oldest first, a page at a time), kept
 * live from the cube's stream, with a reply form. Opening it from any entry shows that entry's
 * whole thread; **Reply** on an entry opens its thread with the form replying to that entry.
 */
export function threadPanel(options: ThreadOptions) {
  let rootId: string | undefined;
  let replyTo: Entry | undefined;
  let nextPage = "";
  const shown = new Map<string, Entry>();
  const title = h("h3", { id: "thread-title", tabindex: "-1" }, "Thread");
  const list = h("ol", { class: "log thread-log", "aria-labelledby": "thread-title" });
  const error = h("p", { class: "error", role: "alert" });
  const more = h("button", { type: "button", class: "small", hidden: true }, "Load more replies");
  const message = h("textarea", { id: "thread-reply", name: "reply", rows: 2, required: true, maxlength: 32768 });
  const hint = h("p", { class: "help", id: "thread-reply-to" });
  message.setAttribute("aria-describedby", "thread-reply-to");
  const send = h("button", { type: "submit", class: "primary small" }, "Send reply");
  const form = h(
    "form",
    { class: "composer reply", "aria-label": "Reply in the thread" },
    h("label", { for: "thread-reply" }, "Reply"),
    message,
    hint,
    h("div", { class: "row" }, send),
  );
  const close = h("button", { type: "button", class: "small", onclick: () => hide() }, "Close thread");
  const box = h(
    "section",
    { class: "card thread", "aria-labelledby": "thread-title", hidden: true },
    h("div", { class: "title-row" }, title, close),
    error,
    list,
    more,
    form,
  );

  const plan = () =>
    replyTo ? replyPlan(options.cubeId, replyTo, message.value, options.seatDroneId(), options.drones()) : undefined;

  const showHint = () => {
    const p = plan();
    if (!replyTo || !p) return;
    const who = replyTo.author?.label || options.label(replyTo.author?.droneId);
    hint.textContent = `Replying to ${who}: “${preview(replyTo.message, 60)}” — goes to ${p.audience}.`;
  };

  const item = (entry: Entry) =>
    h(
      "li",
      {
        class: `entry${entry.visibility === "VISIBILITY_DIRECT" ? " direct" : ""}${entry.id === rootId ? " root" : ""}`,
        "data-entry-id": entry.id,
      },
      h(
        "div",
        { class: "meta" },
        h(
          "strong",
          { class: "author" },
          entry.author?.label || enumLabel(entry.author?.principalKind, "PRINCIPAL_KIND_"),
        ),
        entry.question ? h("span", { class: "badge question" }, "question") : null,
        entry.visibility === "VISIBILITY_DIRECT"
          ? h(
              "span",
              { class: "badge direct" },
              `direct → ${(entry.recipientDroneIds ?? []).map(options.label).join(", ")}`,
            )
          : null,
        time(entry.createdAt, "when"),
      ),
      h("p", { class: "message" }, entry.message ?? ""),
      options.canWrite() && entry.id !== replyTo?.id
        ? h(
            "button",
            {
              type: "button",
              class: "small",
              onclick: () => {
                replyTo = entry;
                showHint();
                render();
                message.focus();
              },
            },
            "Reply to this",
          )
        : null,
    );

  const render = () => {
    const ordered = [...shown.values()].sort((a, b) =>
      a.id === rootId ? -1 : b.id === rootId ? 1 : Date.parse(a.createdAt ?? "") - Date.parse(b.createdAt ?? ""),
    );
    replace(list, ordered.map(item));
    const replies = ordered.length - 1;
    title.textContent = `Thread (${replies} ${replies === 1 ? "reply" : "replies"})`;
    more.hidden = nextPage === "";
    form.hidden = !options.canWrite();
  };

  const load = async (page: string) => {
    if (!rootId) return;
    const asked = rootId;
    const answer = await rpc<{ root?: Entry; replies?: Entry[]; nextPageToken?: string }>(
      `${CUBE}.ActivityService/ReadThread`,
      { cubeId: options.cubeId, entryId: asked, pageSize: 100, pageToken: page },
      options.readToken(),
    );
    if (asked !== rootId) return;
    if (answer.root) {
      rootId = answer.root.id;
      shown.set(answer.root.id, answer.root);
    }
    for (const reply of answer.replies ?? []) shown.set(reply.id, reply);
    nextPage = answer.nextPageToken ?? "";
  };

  const open = async (entry: Entry, reply: boolean) => {
    rootId = entry.threadRootEntryId || entry.id;
    replyTo = entry;
    nextPage = "";
    shown.clear();
    shown.set(entry.id, entry);
    box.hidden = false;
    error.textContent = "";
    showHint();
    render();
    try {
      await load("");
      // A reply that was asked for keeps its target; opening a thread replies to its root.
      if (!reply && rootId) replyTo = shown.get(rootId) ?? replyTo;
      showHint();
      render();
    } catch (e) {
      error.textContent = e instanceof ApiError ? `${e.message} (${e.code})` : (e as Error).message;
    }
    if (reply) message.focus();
    else title.focus();
  };

  const hide = () => {
    box.hidden = true;
    rootId = undefined;
    replyTo = undefined;
    shown.clear();
  };

  more.addEventListener("click", async () => {
    try {
      await load(nextPage);
      render();
    } catch (e) {
      error.textContent = (e as Error).message;
    }
  });
  message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const p = plan();
    if (!p || !message.value.trim()) return;
    send.disabled = true;
    try {
      const { entry } = await rpc<{ entry: Entry }>(
        `${CUBE}.ActivityService/AppendEntry`,
        p.body,
        options.writeToken(),
      );
      message.value = "";
      error.textContent = "";
      shown.set(entry.id, entry);
      render();
      options.posted(entry);
      options.announce("Reply posted");
    } catch (e) {
      error.textContent = e instanceof ApiError ? `${e.message} (${e.code})` : (e as Error).message;
    } finally {
      send.disabled = false;
      message.focus();
    }
  });

  return {
    box,
    open: (entry: Entry, reply = false) => void open(entry, reply),
    /** An entry from the stream: joins the open thread when it belongs to it. */
    onEntry(entry: Entry) {
      if (!rootId) return;
      const belongs =
        entry.id === rootId ||
        entry.threadRootEntryId === rootId ||
        (entry.replyToEntryId !== undefined && shown.has(entry.replyToEntryId));
      if (!belongs) return;
      shown.set(entry.id, { ...shown.get(entry.id), ...entry });
      render();
    },
    /** The root of the open thread, if any. */
    rootId: () => rootId,
  };
}
