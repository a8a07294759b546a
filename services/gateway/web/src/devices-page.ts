import { DEVICE, type Device, listAll, type Placement, rpc } from "./api";
import { cards, enumLabel, h, replace, time } from "./dom";
import { enrollCard } from "./enroll";
import { busy, FormErrors, field, uid } from "./forms";
import type { ListContext, View } from "./lists";

/** Devices with status (revoke with a reason), enroll tokens, and where a root session is placed. */
export function devicesView(context: ListContext): View {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading devices…"));
  const devices = new Map<string, Device>();
  let revoking: string | undefined;

  const revokeForm = (d: Device) => {
    const reason = field(
      "Reason",
      h("input", { name: "reason", required: true, maxlength: 500, autocomplete: "off", id: uid("revoke-reason") }),
      "reason",
      "Recorded in the audit log, e.g. “laptop lost”.",
    );
    const errors = new FormErrors([reason]);
    const submit = h("button", { type: "submit", class: "small danger" }, "Revoke device");
    const form = h(
      "form",
      { class: "stack-form confirm", novalidate: true, "aria-label": `Revoke ${d.displayName || d.id}` },
      h("p", {}, "Its credential stops working, its connection is fenced and nothing new is placed on it."),
      reason.element,
      errors.form,
      h(
        "div",
        { class: "row" },
        submit,
        h(
          "button",
          {
            type: "button",
            class: "small",
            onclick: () => {
              revoking = undefined;
              render();
            },
          },
          "Cancel",
        ),
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      errors.clear();
      if (!reason.control.value.trim()) return void errors.at("reason", "is required");
      void busy(submit, async () => {
        try {
          const answer = await rpc<{ device: Device }>(
            `${DEVICE}.DeviceService/RevokeDevice`,
            { deviceId: d.id, reason: reason.control.value.trim() },
            context.token,
          );
          devices.set(d.id, answer.device);
          revoking = undefined;
          render();
          context.announce(`Device ${d.displayName || d.id} revoked`);
        } catch (e) {
          errors.show(e);
        }
      });
    });
    queueMicrotask(() => reason.control.focus());
    return form;
  };

  const render = () => {
    const list = [...devices.values()];
    replace(
      body,
      list.length === 0
        ? h("p", { class: "muted" }, "No devices enrolled.")
        : cards(
            h(
              "table",
              {},
              h("caption", { class: "sr-only" }, "Enrolled devices"),
              h(
                "thead",
                {},
                h(
                  "tr",
                  {},
                  ["Device", "Platform", "Status", "Connection", "Enrolled"].map((t) => h("th", { scope: "col" }, t)),
                  h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")),
                ),
              ),
              h(
                "tbody",
                {},
                list.map((d) => {
                  const revoked = d.status === "DEVICE_STATUS_REVOKED";
                  const name = d.displayName || d.id.slice(0, 8);
                  return h(
                    "tr",
                    { "data-device-id": d.id },
                    h("th", { scope: "row" }, name),
                    h("td", {}, enumLabel(d.platform, "DEVICE_PLATFORM_")),
                    h(
                      "td",
                      {},
                      h("span", { class: `badge ${revoked ? "warn" : ""}` }, enumLabel(d.status, "DEVICE_STATUS_")),
                      d.revokedReason ? h("div", { class: "muted reason" }, d.revokedReason) : null,
                    ),
                    h(
                      "td",
                      {},
                      h("span", { class: `dot ${d.online ? "on" : "off"}`, "aria-hidden": "true" }),
                      d.online ? "online" : "offline",
                    ),
                    h("td", {}, time(d.enrolledAt)),
                    h(
                      "td",
                      { class: "actions" },
                      revoked
                        ? null
                        : revoking === d.id
                          ? revokeForm(d)
                          : h(
                              "button",
                              {
                                type: "button",
                                class: "small",
                                onclick: () => {
                                  revoking = d.id;
                                  render();
                                },
                              },
                              "Revoke",
                              h("span", { class: "sr-only" }, ` ${name}`),
                            ),
                    ),
                  );
                }),
              ),
            ),
          ),
    );
  };

  const input = h("input", {
    id: "placement-session",
    name: "rootSessionId",
    required: true,
    autocomplete: "off",
    placeholder: "root session id",
  });
  const result = h("div", { role: "status", "aria-live": "polite", class: "placement-result" });
  const lookup = async (event: Event) => {
    event.preventDefault();
    try {
      const { placement } = await rpc<{ placement: Placement }>(
        `${DEVICE}.PlacementService/GetPlacement`,
        { rootSessionId: input.value.trim() },
        context.token,
      );
      const device = placement.deviceId ? devices.get(placement.deviceId) : undefined;
      replace(
        result,
        h(
          "p",
          {},
          h("strong", {}, placement.rootSessionId),
          " runs on ",
          h("strong", {}, device?.displayName || placement.deviceId || "no device"),
          ` (revision ${placement.rev ?? "?"}, placed `,
          time(placement.placedAt),
          ")",
          placement.activeRunId ? ` · active run ${placement.activeRunId}` : "",
        ),
      );
    } catch (e) {
      replace(result, h("p", { class: "error", role: "alert" }, (e as Error).message));
    }
  };
  const element = h(
    "div",
    { class: "stack" },
    h(
      "section",
      { class: "card", "aria-labelledby": "devices-title" },
      h("h2", { id: "devices-title" }, "Devices"),
      body,
    ),
    enrollCard(context.token, context.announce),
    h(
      "section",
      { class: "card", "aria-labelledby": "placement-title" },
      h("h2", { id: "placement-title" }, "Where is a root session placed?"),
      h(
        "form",
        { class: "row", onsubmit: lookup },
        h("label", { for: "placement-session" }, "Root session"),
        input,
        h("button", { type: "submit", class: "primary" }, "Look up"),
      ),
      result,
    ),
  );
  void listAll<Device>(`${DEVICE}.DeviceService/ListDevices`, {}, "devices", context.token).then(
    (list) => {
      for (const d of list) devices.set(d.id, d);
      render();
    },
    (e) => replace(body, h("p", { class: "error", role: "alert" }, (e as Error).message)),
  );
  return { element, dispose() {} };
}
