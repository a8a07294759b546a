import { type Machine, PRESENCE, rpc } from "./api";
import { cards, h, replace, time } from "./dom";
import { openEventStream, type StreamState } from "./events";
import { busy, FormErrors, field, secretBox } from "./forms";

/** What every page gets from the shell. */
export interface ListContext {
  readonly token: string;
  readonly setStreamState: (state: StreamState, detail: string) => void;
  readonly announce: (message: string) => void;
}

/** A page: its element, and what to stop when the page is left. */
export interface View {
  readonly element: HTMLElement;
  dispose(): void;
}

function failure(e: unknown): HTMLElement {
  return h("p", { class: "error", role: "alert" }, (e as Error).message ?? String(e));
}

interface Presence {
  id: string;
  name: string;
  linked: boolean;
  changedAt?: string;
  revoked?: boolean;
}

/** The tenant's machines, linked state kept live by `/v1/machines/events`; register and revoke. */
export function machinesView(context: ListContext): View {
  const machines = new Map<string, Presence>();
  let confirming: string | undefined;
  const body = h("div", {}, h("p", { class: "muted" }, "Loading machines…"));
  const listError = h("p", { class: "error", role: "alert" });
  const secrets = h("div", { class: "secrets" });
  const name = field(
    "Machine name",
    h("input", { name: "name", required: true, maxlength: 200, autocomplete: "off" }),
    "name",
    "The host the machine daemon runs on, e.g. “build-01”. Unique among the tenant's machines.",
  );
  const errors = new FormErrors([name]);
  const submit = h("button", { type: "submit", class: "primary" }, "Register machine");
  const form = h(
    "form",
    { class: "row-form", novalidate: true, "aria-labelledby": "register-title" },
    name.element,
    submit,
    errors.form,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    errors.clear();
    if (!name.control.value.trim()) return void errors.at("name", "is required");
    void busy(submit, async () => {
      try {
        const answer = await rpc<{ machine: Machine; token: string }>(
          `${PRESENCE}.MachineService/RegisterMachine`,
          { name: name.control.value.trim() },
          context.token,
        );
        form.reset();
        machines.set(answer.machine.id, { id: answer.machine.id, name: answer.machine.name, linked: false });
        render();
        secrets.replaceChildren(
          secretBox(
            `Machine ${answer.machine.name} registered`,
            answer.token,
            "This token is shown once. The machine daemon links with it (Authorization: Bearer <token>).",
          ),
        );
        context.announce(`Machine ${answer.machine.name} registered; copy its token now`);
      } catch (e) {
        errors.show(e);
      }
    });
  });
  const revoke = async (m: Presence) => {
    try {
      await rpc(`${PRESENCE}.MachineService/RevokeMachine`, { machineId: m.id }, context.token);
      machines.set(m.id, { ...m, linked: false, revoked: true });
      confirming = undefined;
      listError.textContent = "";
      render();
      context.announce(`Machine ${m.name} revoked`);
    } catch (e) {
      listError.textContent = (e as Error).message;
    }
  };
  const actionCell = (m: Presence) => {
    if (m.revoked) return h("span", { class: "badge warn" }, "revoked");
    if (confirming === m.id)
      return h(
        "div",
        { class: "row confirm" },
        h("span", {}, `Revoke ${m.name}? Its token stops working and its link closes.`),
        h("button", { type: "button", class: "small danger", onclick: () => void revoke(m) }, "Confirm revocation"),
        h(
          "button",
          {
            type: "button",
            class: "small",
            onclick: () => {
              confirming = undefined;
              render();
            },
          },
          "Cancel",
        ),
      );
    return h(
      "button",
      {
        type: "button",
        class: "small",
        onclick: () => {
          confirming = m.id;
          render();
        },
      },
      "Revoke",
      h("span", { class: "sr-only" }, ` ${m.name}`),
    );
  };
  const render = () => {
    const list = [...machines.values()].sort((a, b) => a.name.localeCompare(b.name));
    const active = list.filter((m) => !m.revoked);
    const linked = active.filter((m) => m.linked).length;
    replace(
      body,
      h("p", { class: "muted summary" }, `${linked} of ${active.length} linked`),
      listError,
      list.length === 0
        ? h("p", { class: "muted" }, "No machines registered.")
        : cards(
            h(
              "table",
              { class: "machines" },
              h("caption", { class: "sr-only" }, "Machines and their link state"),
              h(
                "thead",
                {},
                h(
                  "tr",
                  {},
                  h("th", { scope: "col" }, "Machine"),
                  h("th", { scope: "col" }, "State"),
                  h("th", { scope: "col" }, "Last change"),
                  h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")),
                ),
              ),
              h(
                "tbody",
                {},
                list.map((m) =>
                  h(
                    "tr",
                    { "data-machine-id": m.id, "data-state": m.revoked ? "revoked" : m.linked ? "linked" : "unlinked" },
                    h("th", { scope: "row" }, m.name),
                    h(
                      "td",
                      {},
                      h("span", { class: `dot ${m.linked ? "on" : "off"}`, "aria-hidden": "true" }),
                      h("span", { class: "state" }, m.linked ? "linked" : "unlinked"),
                    ),
                    h("td", {}, time(m.changedAt)),
                    h("td", {}, actionCell(m)),
                  ),
                ),
              ),
            ),
          ),
    );
    if (confirming) body.querySelector<HTMLButtonElement>(".confirm button")?.focus();
  };
  const transition = (data: unknown, linked: boolean) => {
    const event = data as { machineId: string; name?: string; at?: string };
    const known = machines.get(event.machineId);
    machines.set(event.machineId, {
      id: event.machineId,
      name: event.name || known?.name || event.machineId,
      linked,
      changedAt: event.at,
      revoked: known?.revoked,
    });
    render();
    context.announce(`${event.name || "A machine"} ${linked ? "linked" : "unlinked"}`);
  };
  // The stream starts with a snapshot (no cursor yet) and then carries every transition.
  const stream = openEventStream({
    path: "/v1/machines/events",
    token: () => context.token,
    readyEvents: ["machine_ready"],
    terminalEvents: ["access_revoked"],
    onState: (state, detail) => context.setStreamState(state, detail),
    onEvent: (type, data) => {
      if (type === "machine_snapshot") {
        const snapshot = data as {
          items?: { machineId: string; name: string; linked?: boolean; changedAt?: string }[];
        };
        for (const item of snapshot.items ?? []) {
          machines.set(item.machineId, {
            id: item.machineId,
            name: item.name,
            linked: item.linked ?? false,
            changedAt: item.changedAt,
            revoked: machines.get(item.machineId)?.revoked,
          });
        }
        render();
      } else if (type === "machine_linked") transition(data, true);
      else if (type === "machine_unlinked") transition(data, false);
      else if (type === "machine_ready") render();
      else if (type === "access_revoked") context.setStreamState("ended", "access revoked");
    },
  });
  // Machines registered after the snapshot appear with their first transition; a fresh list
  // fills in names of machines that never linked.
  void rpc<{ machines?: Machine[] }>(`${PRESENCE}.MachineService/ListMachines`, { pageSize: 500 }, context.token).then(
    (answer) => {
      for (const m of answer.machines ?? []) {
        if (!machines.has(m.id)) {
          machines.set(m.id, { id: m.id, name: m.name, linked: m.linked ?? false, changedAt: m.presenceChangedAt });
        }
      }
      render();
    },
    (e) => replace(body, failure(e)),
  );
  const element = h(
    "div",
    { class: "stack" },
    h(
      "section",
      { class: "card", "aria-labelledby": "register-title" },
      h("h2", { id: "register-title" }, "Register a machine"),
      form,
      secrets,
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "machines-title" },
      h("h2", { id: "machines-title" }, "Machines"),
      body,
    ),
  );
  return { element, dispose: () => stream.close() };
}
