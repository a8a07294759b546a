/** A tiny DOM builder: strings become text nodes (never HTML), `on*` attributes become listeners. */
export type Child = Node | string | number | null | undefined | false;
type AttrValue = string | number | boolean | undefined | null | ((event: Event) => void);

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, AttrValue> = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === "function") element.addEventListener(name.slice(2).toLowerCase(), value);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's children. */
export function replace(parent: Element, ...children: (Child | Child[])[]): void {
  parent.replaceChildren();
  append(parent, children);
}

/**
 * "just now", "5 min ago", "3 h ago", or a date, for an RFC 3339 timestamp; a future instant
 * (a claim's stale_at) reads "in 40 s", "in 14 min", "in 2 h".
 */
export function ago(iso: string | undefined, now = Date.now()): string {
  if (!iso) return "never";
  const seconds = Math.round((now - Date.parse(iso)) / 1000);
  if (seconds <= -10) {
    const ahead = -seconds;
    if (ahead < 60) return `in ${ahead} s`;
    if (ahead < 3600) return `in ${Math.floor(ahead / 60)} min`;
    if (ahead < 86_400) return `in ${Math.floor(ahead / 3600)} h`;
    return new Date(iso).toLocaleDateString();
  }
  if (seconds < 10) return "just now";
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

/** A `<time>` element showing a relative time, with the exact instant as its tooltip. */
export function time(iso: string | undefined, className?: string): HTMLTimeElement | Text {
  if (!iso) return document.createTextNode("never");
  return h("time", { datetime: iso, title: new Date(iso).toLocaleString(), class: className }, ago(iso));
}

/** Re-renders every relative `<time>` below `root` (called on a timer). */
export function refreshTimes(root: ParentNode): void {
  for (const element of root.querySelectorAll<HTMLTimeElement>("time[datetime]")) {
    element.textContent = ago(element.dateTime);
  }
}

/** Strips the enum prefix: `DRONE_POSTURE_OBSERVER` → `observer`. */
export function enumLabel(value: string | undefined, prefix: string): string {
  if (!value) return "unspecified";
  return value.replace(prefix, "").toLowerCase().replaceAll("_", " ");
}

/**
 * Marks a table to become one card per row on narrow screens: each body cell gets its column's
 * heading as `data-label`, which the stylesheet shows before the value. Answers the table.
 */
export function cards<T extends HTMLTableElement>(table: T): T {
  table.classList.add("cards");
  const headings = [...table.querySelectorAll("thead th")].map((th) => th.textContent?.trim() ?? "");
  for (const row of table.querySelectorAll("tbody tr")) {
    [...row.children].forEach((cell, i) => {
      const label = headings[i];
      if (label && cell.tagName === "TD") cell.setAttribute("data-label", label);
    });
  }
  return table;
}
