/**
 * Form plumbing shared by the admin pages: labelled fields with an error slot each, API errors
 * routed to the field they name (Connect messages read "field: reason"), and secrets shown once.
 */
import { ApiError } from "./api";
import { append, h } from "./dom";

type Control = HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement;

/** One labelled input with its help text and the slot its error appears in. */
export interface Field<C extends Control = Control> {
  readonly element: HTMLElement;
  readonly control: C;
  readonly error: HTMLElement;
}

let counter = 0;

/** A unique element id with a readable prefix. */
export function uid(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}`;
}

/**
 * A field: `<label>` bound to the control, optional help, and an error line. `apiField` is the
 * request field name the API reports errors under (e.g. `taxonomy_json`).
 */
export function field<C extends Control>(label: string, control: C, apiField: string, help?: string): Field<C> {
  if (!control.id) control.id = uid(apiField.replaceAll("_", "-"));
  control.dataset.field = apiField;
  const helpId = `${control.id}-help`;
  const errorId = `${control.id}-error`;
  const error = h("p", { class: "field-error", id: errorId, role: "alert" });
  control.setAttribute("aria-describedby", help ? `${helpId} ${errorId}` : errorId);
  const element = h(
    "div",
    { class: "field" },
    h("label", { for: control.id }, label),
    control,
    help ? h("p", { class: "help", id: helpId }, help) : null,
    error,
  );
  return { element, control, error };
}

/** A checkbox with its label beside it and an explanation under it. */
export function flag(label: string, apiField: string, explanation: string, checked = false): Field<HTMLInputElement> {
  const control = h("input", { type: "checkbox", id: uid(apiField.replaceAll("_", "-")), name: apiField, checked });
  control.dataset.field = apiField;
  const helpId = `${control.id}-help`;
  const error = h("p", { class: "field-error", id: `${control.id}-error`, role: "alert" });
  control.setAttribute("aria-describedby", `${helpId} ${control.id}-error`);
  const element = h(
    "div",
    { class: "flag" },
    h("div", { class: "flag-row" }, control, h("label", { for: control.id }, label)),
    h("p", { class: "help", id: helpId }, explanation),
    error,
  );
  return { element, control, error };
}

/** Splits a Connect error message "field: reason" into its parts (undefined when it names none). */
export function fieldOf(message: string): { field: string; reason: string } | undefined {
  const match = /^([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*): (.+)$/s.exec(message);
  return match ? { field: match[1] as string, reason: match[2] as string } : undefined;
}

/** The messages of a form: one per field plus one for the form itself. */
export class FormErrors {
  constructor(
    private readonly fields: readonly Field[],
    readonly form: HTMLElement = h("p", { class: "error", role: "alert" }),
  ) {}

  /** Clears every message and `aria-invalid`. */
  clear(): void {
    this.form.textContent = "";
    for (const f of this.fields) {
      f.error.textContent = "";
      f.control.removeAttribute("aria-invalid");
    }
  }

  /** Shows `text` next to the field named `name`; answers false when no field has that name. */
  at(name: string, text: string): boolean {
    const target = this.fields.find((f) => f.control.dataset.field === name);
    if (!target) return false;
    target.error.textContent = text;
    target.control.setAttribute("aria-invalid", "true");
    target.control.focus();
    return true;
  }

  /** Shows an API failure next to the field it names, or on the form when it names none. */
  show(e: unknown): void {
    this.clear();
    const message = e instanceof Error ? e.message : String(e);
    const named = fieldOf(message);
    if (named && this.at(named.field, named.reason)) return;
    // A taken name (ALREADY_EXISTS) names no field in its message, but it is about the name.
    if (e instanceof ApiError && e.code === "already_exists" && /\bname\b/.test(message) && this.at("name", message))
      return;
    this.form.textContent = e instanceof ApiError ? `${message} (${e.code.replaceAll("_", " ")})` : message;
  }
}

/**
 * A secret shown once: the value in a read-only box, a copy button, and an optional snippet
 * (e.g. MCP settings) with its own copy button. `done` removes it.
 */
export function secretBox(
  title: string,
  secret: string,
  note: string,
  snippet?: { label: string; text: string },
): HTMLElement {
  const box = h("section", { class: "secret", "aria-label": title, tabindex: "-1" });
  const copyRow = (label: string, text: string, multiline: boolean) => {
    const id = uid("secret");
    const status = h("span", { class: "copy-status", role: "status" });
    const control = multiline
      ? h("textarea", { id, readonly: true, rows: text.split("\n").length + 2, spellcheck: "false" }, text)
      : h("input", { id, readonly: true, value: text, spellcheck: "false", autocomplete: "off" });
    return h(
      "div",
      { class: "field" },
      h("label", { for: id }, label),
      control,
      h(
        "div",
        { class: "row" },
        h(
          "button",
          {
            type: "button",
            onclick: async () => {
              try {
                await navigator.clipboard.writeText(text);
                status.textContent = "Copied";
              } catch {
                control.select();
                status.textContent = "Selected: press Ctrl+C to copy";
              }
            },
          },
          `Copy ${label === "Token" ? "token" : label}`,
        ),
        status,
      ),
    );
  };
  append(box, [
    h("h3", {}, title),
    h("p", { class: "warn-note" }, note),
    copyRow("Token", secret, false),
    snippet ? copyRow(snippet.label, snippet.text, true) : null,
    h("button", { type: "button", onclick: () => box.remove() }, "I have saved it"),
  ]);
  queueMicrotask(() => box.focus());
  return box;
}

/** The MCP client settings for a client token, ready to paste (Claude Code / Desktop style). */
export function mcpSettings(token: string, origin = location.origin): string {
  return JSON.stringify(
    {
      mcpServers: { unimatrix: { type: "http", url: `${origin}/mcp`, headers: { Authorization: `Bearer ${token}` } } },
    },
    null,
    2,
  );
}

/**
 * Claude Code's hooks (`.claude/settings.json`) calling `unimatrix-hook`, the fast client of
 * `unimatrix hook`: what waits for the agent's seat lands in its context between tool calls. With
 * no machine daemon the hook asks this gateway.
 */
export function hookSettings(origin = location.origin): string {
  const hook = (event: string) => [{ hooks: [{ type: "command", command: `unimatrix-hook ${event}` }] }];
  return JSON.stringify(
    {
      env: { UNIMATRIX_GATEWAY: origin },
      hooks: {
        SessionStart: hook("session-start"),
        PostToolUse: [{ matcher: "*", ...hook("post-tool-use")[0] }],
        UserPromptSubmit: hook("user-prompt-submit"),
        Stop: hook("stop"),
        SessionEnd: hook("session-end"),
      },
    },
    null,
    2,
  );
}

/** The same for any other host that adds a command's stdout to the agent's context: plain lines. */
export function plainHookCommand(origin = location.origin): string {
  return `echo '{"session_id":"<the host session id>"}' | UNIMATRIX_GATEWAY=${origin} unimatrix-hook user-prompt-submit --format text --harness <host>`;
}

/** Disables a button while `work` runs. */
export async function busy(button: HTMLButtonElement, work: () => Promise<void>): Promise<void> {
  button.disabled = true;
  try {
    await work();
  } finally {
    button.disabled = false;
  }
}
