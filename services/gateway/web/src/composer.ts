import { CUBE, type Entry, type Notification, rpc } from "./api";
import { h, replace, time } from "./dom";

/** What the composer needs from its cube view. */
export interface ComposerOptions {
  readonly cubeId: string;
  /** The token posts go out with (the seat's session, else the signed-in token). */
  readonly actor: () => string;
  readonly posted: (entry: Entry) => void;
  readonly failed: (error: unknown) => void;
}

/** The post form: message, audience (everyone or one drone), Ctrl/⌘+Enter to send. */
export function buildComposer({ cubeId, actor, posted, failed }: ComposerOptions) {
  const message = h("textarea", {
    id: "compose-message",
    name: "message",
    rows: 3,
    required: true,
    maxlength: 32768,
    placeholder: "Write to the cube…",
  });
  const to = h("select", { id: "compose-to", name: "to" }, h("option", { value: "" }, "Everyone (broadcast)"));
  const send = h("button", { type: "submit", class: "primary send" }, "Post");
  const form = h(
    "form",
    { class: "composer", "aria-label": "Post to the cube" },
    h("label", { for: "compose-message" }, "Message"),
    message,
    h("div", { class: "row" }, h("label", { for: "compose-to" }, "To"), to, send),
  );
  message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = message.value;
    if (!text.trim()) return;
    send.disabled = true;
    try {
      const direct = to.value !== "";
      const { entry } = await rpc<{ entry: Entry }>(
        `${CUBE}.ActivityService/AppendEntry`,
        {
          cubeId,
          message: text,
          visibility: direct ? "VISIBILITY_DIRECT" : "VISIBILITY_BROADCAST",
          recipientDroneIds: direct ? [to.value] : [],
        },
        actor(),
      );
      message.value = "";
      posted(entry);
    } catch (e) {
      failed(e);
    } finally {
      send.disabled = false;
      message.focus();
    }
  });
  return { form, message, to, send };
}

/** The seat's notifications card: newest first, the last 20, hidden while empty. */
export function noticesCard() {
  const notices: Notification[] = [];
  const list = h("ul", { class: "plain notices", "aria-label": "Notifications" });
  const box = h(
    "section",
    { class: "card", "aria-labelledby": "notices-title", hidden: true },
    h("h3", { id: "notices-title" }, "Notifications"),
    list,
  );
  return {
    box,
    add(notification: Notification) {
      if (notices.some((n) => n.id === notification.id)) return;
      notices.unshift(notification);
      notices.length = Math.min(notices.length, 20);
      box.hidden = false;
      replace(
        list,
        notices.map((n) =>
          h(
            "li",
            { "data-notification-id": n.id },
            h("span", { class: "notice-text" }, n.text ?? ""),
            h("div", { class: "muted" }, n.actorRoleName ?? "", n.actorRoleName ? " · " : "", time(n.createdAt)),
          ),
        ),
      );
    },
    clear() {
      notices.length = 0;
      box.hidden = true;
      list.replaceChildren();
    },
  };
}
