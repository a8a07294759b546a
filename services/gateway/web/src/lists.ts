import { CUBE, type Cube, DEVICE, type Device, type Machine, type Placement, PRESENCE, rpc } from "./api";
import { enumLabel, h, replace, time } from "./dom";
import { openEventStream, type StreamState } from "./events";

export interface ListContext {
  readonly token: string;
  readonly setStreamState: (state: StreamState, detail: string) => void;
  readonly announce: (message: string) => void;
}

export interface View {
  readonly element: HTMLElement;
  dispose(): void;
}

function failure(e: unknown): HTMLElement {
  return h("p", { class: "error", role: "alert" }, (e as Error).message ?? String(e));
}

/** The cubes the signed-in principal can read. */
export function cubesView(context: ListContext): View {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading cubes…"));
  const element = h(
    "section",
    { class: "card", "aria-labelledby": "cubes-title" },
    h("h2", { id: "cubes-title" }, "Cubes"),
    body,
  );
  void (async () => {
    try {
      const cubes: Cube[] = [];
      let pageToken = "";
      do {
        const page = await rpc<{ cubes?: Cube[]; nextPageToken?: string }>(
          `${CUBE}.CubeService/ListCubes`,
          { pageSize: 500, pageToken },
          context.token,
        );
        cubes.push(...(page.cubes ?? []));
        pageToken = page.nextPageToken ?? "";
      } while (pageToken && cubes.length < 5000);
      replace(
        body,
        cubes.length === 0
          ? h("p", { class: "muted" }, "No cubes yet.")
          : h(
              "ul",
              { class: "cube-list" },
              cubes.map((cube) =>
                h(
                  "li",
                  {},
                  h("a", { href: `#/cubes/${encodeURIComponent(cube.id)}`, class: "cube-link" }, cube.name),
                  h("span", { class: "badge access" }, enumLabel(cube.callerAccess, "CUBE_ACCESS_")),
                  h(
                    "p",
                    { class: "muted directive-preview" },
                    cube.directive ? cube.directive.slice(0, 200) : "No directive",
                  ),
                  h("div", { class: "muted" }, "Updated ", time(cube.updatedAt ?? cube.createdAt)),
                ),
              ),
            ),
      );
    } catch (e) {
      replace(body, failure(e));
    }
  })();
  return { element, dispose() {} };
}

interface Presence {
  id: string;
  name: string;
  linked: boolean;
  changedAt?: string;
}

/** The tenant's machines, linked state kept live by `/v1/machines/events`. */
export function machinesView(context: ListContext): View {
  const machines = new Map<string, Presence>();
  const body = h("div", {}, h("p", { class: "muted" }, "Loading machines…"));
  const element = h(
    "section",
    { class: "card", "aria-labelledby": "machines-title" },
    h("h2", { id: "machines-title" }, "Machines"),
    body,
  );
  const render = () => {
    const list = [...machines.values()].sort((a, b) => a.name.localeCompare(b.name));
    const linked = list.filter((m) => m.linked).length;
    replace(
      body,
      h("p", { class: "muted summary" }, `${linked} of ${list.length} linked`),
      list.length === 0
        ? h("p", { class: "muted" }, "No machines registered.")
        : h(
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
              ),
            ),
            h(
              "tbody",
              {},
              list.map((m) =>
                h(
                  "tr",
                  { "data-machine-id": m.id, "data-state": m.linked ? "linked" : "unlinked" },
                  h("th", { scope: "row" }, m.name),
                  h(
                    "td",
                    {},
                    h("span", { class: `dot ${m.linked ? "on" : "off"}`, "aria-hidden": "true" }),
                    h("span", { class: "state" }, m.linked ? "linked" : "unlinked"),
                  ),
                  h("td", {}, time(m.changedAt)),
                ),
              ),
            ),
          ),
    );
  };
  const transition = (data: unknown, linked: boolean) => {
    const event = data as { machineId: string; name?: string; at?: string };
    const known = machines.get(event.machineId);
    machines.set(event.machineId, {
      id: event.machineId,
      name: event.name ?? known?.name ?? event.machineId,
      linked,
      changedAt: event.at,
    });
    render();
    context.announce(`${event.name ?? "A machine"} ${linked ? "linked" : "unlinked"}`);
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
        machines.clear();
        for (const item of snapshot.items ?? []) {
          machines.set(item.machineId, {
            id: item.machineId,
            name: item.name,
            linked: item.linked ?? false,
            changedAt: item.changedAt,
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
  return { element, dispose: () => stream.close() };
}

/** Devices with status, and a lookup of where a root session is placed. */
export function devicesView(context: ListContext): View {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading devices…"));
  const devices = new Map<string, Device>();
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
      replace(result, failure(e));
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
  void (async () => {
    try {
      const answer = await rpc<{ devices?: Device[] }>(
        `${DEVICE}.DeviceService/ListDevices`,
        { pageSize: 500 },
        context.token,
      );
      for (const d of answer.devices ?? []) devices.set(d.id, d);
      const list = [...devices.values()];
      replace(
        body,
        list.length === 0
          ? h("p", { class: "muted" }, "No devices enrolled.")
          : h(
              "table",
              {},
              h("caption", { class: "sr-only" }, "Enrolled devices"),
              h(
                "thead",
                {},
                h(
                  "tr",
                  {},
                  h("th", { scope: "col" }, "Device"),
                  h("th", { scope: "col" }, "Platform"),
                  h("th", { scope: "col" }, "Status"),
                  h("th", { scope: "col" }, "Connection"),
                  h("th", { scope: "col" }, "Enrolled"),
                ),
              ),
              h(
                "tbody",
                {},
                list.map((d) =>
                  h(
                    "tr",
                    { "data-device-id": d.id },
                    h("th", { scope: "row" }, d.displayName || d.id.slice(0, 8)),
                    h("td", {}, enumLabel(d.platform, "DEVICE_PLATFORM_")),
                    h(
                      "td",
                      {},
                      h(
                        "span",
                        { class: `badge ${d.status === "DEVICE_STATUS_REVOKED" ? "warn" : ""}` },
                        enumLabel(d.status, "DEVICE_STATUS_"),
                      ),
                      d.revokedReason ? h("div", { class: "muted" }, d.revokedReason) : null,
                    ),
                    h(
                      "td",
                      {},
                      h("span", { class: `dot ${d.online ? "on" : "off"}`, "aria-hidden": "true" }),
                      d.online ? "online" : "offline",
                    ),
                    h("td", {}, time(d.enrolledAt)),
                  ),
                ),
              ),
            ),
      );
    } catch (e) {
      replace(body, failure(e));
    }
  })();
  return { element, dispose() {} };
}
