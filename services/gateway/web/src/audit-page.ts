import { type AuditEvent, DEVICE, type Device, listAll, rpc } from "./api";
import { cards, enumLabel, h, time } from "./dom";
import { busy, type Field, FormErrors, field, flag } from "./forms";
import type { ListContext, View } from "./lists";

/** The audited event types, as the device contract lists them. */
const AUDIT_TYPES = [
  "ENROLL_TOKEN_ISSUED",
  "ENROLL_TOKEN_REVOKED",
  "DEVICE_ENROLLED",
  "DEVICE_REVOKED",
  "CONNECTION_ACQUIRED",
  "CONNECTION_FENCED",
  "CONNECTION_RELEASED",
  "CONNECTION_EXPIRED",
  "SESSION_PLACED",
  "SESSION_REBOUND",
  "RUN_BEGAN",
  "RUN_ENDED",
] as const;

/** `datetime-local` text (local time) as RFC 3339, or undefined when empty. */
export function localToIso(value: string): string | undefined {
  if (!value) return undefined;
  const at = new Date(value);
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
}

/** The device context's audit trail, newest first, filtered by device, type and time. */
export function auditView(context: ListContext): View {
  const devices = new Map<string, Device>();
  const device = field(
    "Device",
    h("select", { name: "device_id" }, h("option", { value: "" }, "Any device")),
    "device_id",
  );
  const from = field(
    "From",
    h("input", { type: "datetime-local", name: "start_time", step: 1 }),
    "start_time",
    "Events at or after this time.",
  );
  const to = field(
    "Until",
    h("input", { type: "datetime-local", name: "end_time", step: 1 }),
    "end_time",
    "Events before this time.",
  );
  const types = AUDIT_TYPES.map((t) => flag(enumLabel(t, ""), "event_types", "", false));
  for (const [i, t] of types.entries()) {
    t.control.value = `AUDIT_EVENT_TYPE_${AUDIT_TYPES[i]}`;
    t.element.querySelector(".help")?.remove();
    t.control.setAttribute("aria-describedby", t.error.id);
  }
  const typeError = h("p", { class: "field-error", role: "alert" });
  // The type checkboxes share one error line: the API names `event_types` for the whole set.
  const typeField: Field = { element: h("div"), control: types[0]!.control, error: typeError };
  const errors = new FormErrors([device, from, to, typeField]);
  const apply = h("button", { type: "submit", class: "primary" }, "Apply filters");
  const form = h(
    "form",
    { class: "stack-form audit-filters", novalidate: true, "aria-label": "Audit filters" },
    h("div", { class: "row-form" }, device.element, from.element, to.element),
    h(
      "fieldset",
      { class: "flags types" },
      h("legend", {}, "Event types (none checked: all)"),
      types.map((t) => t.element),
      typeError,
    ),
    errors.form,
    apply,
  );
  const rows = h("tbody", {});
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const count = h("p", { class: "muted summary", role: "status" });
  let nextPageToken = "";
  let shown = 0;
  let filters: Record<string, unknown> = {};

  const row = (e: AuditEvent) => {
    const d = e.deviceId ? devices.get(e.deviceId) : undefined;
    return h(
      "tr",
      { "data-audit-id": e.id, "data-type": e.eventType ?? "" },
      h("td", {}, time(e.at)),
      h("th", { scope: "row" }, enumLabel(e.eventType, "AUDIT_EVENT_TYPE_")),
      h("td", {}, d?.displayName || (e.deviceId ?? "").slice(0, 8) || "—"),
      h("td", {}, e.rootSessionId || "—"),
      h("td", { class: "detail" }, e.detailJson && e.detailJson !== "{}" ? h("code", {}, e.detailJson) : "—"),
    );
  };

  const load = async (first: boolean) => {
    const answer = await rpc<{ events?: AuditEvent[]; nextPageToken?: string }>(
      `${DEVICE}.AuditService/ListAuditEvents`,
      { ...filters, pageSize: 50, pageToken: first ? "" : nextPageToken },
      context.token,
    );
    if (first) {
      rows.replaceChildren();
      shown = 0;
    }
    for (const e of answer.events ?? []) rows.append(row(e));
    cards(rows.closest("table") as HTMLTableElement);
    shown += answer.events?.length ?? 0;
    nextPageToken = answer.nextPageToken ?? "";
    more.hidden = nextPageToken === "";
    count.textContent = `${shown} event${shown === 1 ? "" : "s"}${nextPageToken ? " (more available)" : ""}`;
  };

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    errors.clear();
    const checked = types.filter((t) => t.control.checked).map((t) => t.control.value);
    filters = {
      deviceId: device.control.value,
      eventTypes: checked,
      ...(localToIso(from.control.value) ? { startTime: localToIso(from.control.value) } : {}),
      ...(localToIso(to.control.value) ? { endTime: localToIso(to.control.value) } : {}),
    };
    void busy(apply, async () => {
      try {
        await load(true);
      } catch (e) {
        errors.show(e);
      }
    });
  });
  more.addEventListener("click", () => void busy(more, () => load(false).catch((e) => errors.show(e))));

  const element = h(
    "section",
    { class: "card", "aria-labelledby": "audit-title" },
    h("h2", { id: "audit-title" }, "Audit log"),
    h(
      "p",
      { class: "help" },
      "Everything that happened to enroll tokens, devices, their connections and placements, newest first.",
    ),
    form,
    count,
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "audit" },
        h("caption", { class: "sr-only" }, "Audit events"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["When", "Event", "Device", "Root session", "Detail"].map((t) => h("th", { scope: "col" }, t)),
          ),
        ),
        rows,
      ),
    ),
    more,
  );
  void (async () => {
    try {
      for (const d of await listAll<Device>(`${DEVICE}.DeviceService/ListDevices`, {}, "devices", context.token)) {
        devices.set(d.id, d);
        device.control.append(h("option", { value: d.id }, d.displayName || d.id));
      }
      await load(true);
    } catch (e) {
      errors.show(e);
    }
  })();
  return { element, dispose() {} };
}
