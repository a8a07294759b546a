import { type Client, CUBE, type Drone, IDENTITY, listAll, rpc } from "./api";
import { cards, enumLabel, h, replace, time } from "./dom";

/** A drone's sessions, as far as the public API tells: live, expired, or revoked (and why). */
export type SessionState = "live" | "expired" | "revoked";

/**
 * What became of a drone's sessions. The API reports `live` (an unexpired, unrevoked session
 * exists) and `evicted_at`; a session that ended without eviction was revoked when its client
 * was revoked or its credential rotated after the drone was last seen, and otherwise expired.
 */
export function sessionState(drone: Drone, client: Client | undefined): { state: SessionState; why: string } {
  if (drone.evictedAt) return { state: "revoked", why: "evicted" };
  if (drone.live) return { state: "live", why: "a session is open" };
  if (client?.revokedAt) return { state: "revoked", why: "client revoked" };
  if (
    client?.credentialIssuedAt &&
    drone.lastSeenAt &&
    Date.parse(client.credentialIssuedAt) > Date.parse(drone.lastSeenAt)
  )
    return { state: "revoked", why: "credential rotated" };
  return { state: "expired", why: "no session open" };
}

/** The seats card of the manage page: every drone (evicted ones too) with its sessions' state. */
export function seatsAdmin(
  box: HTMLElement,
  cubeId: string,
  token: string,
  announce: (m: string) => void,
): { refresh(): Promise<void> } {
  let confirming: string | undefined;
  let drones: Drone[] = [];
  let clients = new Map<string, Client>();
  const error = h("p", { class: "error", role: "alert" });
  const render = () => {
    replace(
      box,
      h(
        "div",
        { class: "title-row" },
        h("h3", { id: "seats-title" }, `Seats (${drones.filter((d) => !d.evictedAt).length})`),
        h("button", { type: "button", class: "small", onclick: () => void refresh() }, "Refresh seats"),
      ),
      h(
        "p",
        { class: "help" },
        "Evicting a drone ends its sessions at once (its streams get access_revoked) and drops it from recipient lists.",
      ),
      error,
      drones.length === 0
        ? h("p", { class: "muted" }, "No seats taken yet.")
        : cards(
            h(
              "table",
              { class: "seats" },
              h("caption", { class: "sr-only" }, "Seats and their sessions"),
              h(
                "thead",
                {},
                h(
                  "tr",
                  {},
                  ["Drone", "Client", "Posture", "Sessions", "Last seen", ""].map((t) => h("th", { scope: "col" }, t)),
                ),
              ),
              h(
                "tbody",
                {},
                drones.map((drone) => {
                  const client = drone.clientId ? clients.get(drone.clientId) : undefined;
                  const { state, why } = sessionState(drone, client);
                  const label = drone.label || drone.id.slice(0, 8);
                  return h(
                    "tr",
                    { "data-drone-id": drone.id, "data-session-state": state },
                    h("th", { scope: "row" }, label, h("div", { class: "muted" }, drone.roleName ?? "")),
                    h("td", {}, client?.name ?? (drone.clientId ?? "").slice(0, 8)),
                    h("td", {}, enumLabel(drone.posture, "DRONE_POSTURE_")),
                    h("td", {}, h("span", { class: `badge state-${state}` }, state), h("div", { class: "muted" }, why)),
                    h("td", {}, time(drone.lastSeenAt)),
                    h(
                      "td",
                      {},
                      drone.evictedAt
                        ? h("span", { class: "muted" }, "evicted ", time(drone.evictedAt))
                        : confirming === drone.id
                          ? h(
                              "div",
                              { class: "row confirm" },
                              h("span", {}, `Evict ${label}? Its sessions end now.`),
                              h(
                                "button",
                                { type: "button", class: "small danger", onclick: () => void evict(drone) },
                                "Confirm eviction",
                              ),
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
                            )
                          : h(
                              "button",
                              {
                                type: "button",
                                class: "small",
                                onclick: () => {
                                  confirming = drone.id;
                                  render();
                                },
                              },
                              "Evict",
                              h("span", { class: "sr-only" }, ` ${label}`),
                            ),
                    ),
                  );
                }),
              ),
            ),
          ),
    );
    // Keyboard users land on the confirmation they just asked for.
    if (confirming) box.querySelector<HTMLButtonElement>(".confirm button")?.focus();
  };
  const evict = async (drone: Drone) => {
    try {
      const answer = await rpc<{ revokedSessionCount?: number }>(
        `${CUBE}.CubeService/EvictDrone`,
        { cubeId, droneId: drone.id },
        token,
      );
      confirming = undefined;
      announce(`${drone.label ?? "Drone"} evicted; ${answer.revokedSessionCount ?? 0} session(s) ended`);
      await refresh();
    } catch (e) {
      error.textContent = (e as Error).message;
    }
  };
  const refresh = async () => {
    try {
      const [list, clientList] = await Promise.all([
        listAll<Drone>(`${CUBE}.CubeService/ListDrones`, { cubeId, includeEvicted: true }, "drones", token),
        listAll<Client>(`${IDENTITY}/ListClients`, { includeRevoked: true }, "clients", token).catch(
          () => [] as Client[],
        ),
      ]);
      drones = list;
      clients = new Map(clientList.map((c) => [c.id, c]));
      error.textContent = "";
    } catch (e) {
      error.textContent = (e as Error).message;
    }
    render();
  };
  render();
  return { refresh };
}
