import { CUBE, type Drone, type Role, rpc, type Seat, session, tokenKind } from "./api";
import { h, replace } from "./dom";

/** What the seat card needs from its cube view. */
export interface SeatPanelOptions {
  readonly cubeId: string;
  /** The signed-in token (a client token may take a seat; a user token only views). */
  readonly signedIn: string;
  readonly roles: () => readonly Role[];
  /** A seat was taken: the view reads and streams again as the seat (errors go to `failed`). */
  readonly seated: () => Promise<void>;
  /** The seat was left: the view reads and streams again as the signed-in token. */
  readonly left: () => void;
  readonly announce: (message: string) => void;
  readonly failed: (error: unknown) => void;
  readonly clearError: () => void;
}

/**
 * The human seat: which drone this browser sits as in the cube (kept in the session, so a reload
 * keeps it), the form that takes one with a client token, and leaving it.
 */
export function seatPanel(options: SeatPanelOptions) {
  const { cubeId, signedIn } = options;
  let seat: Seat | undefined = session.seat(cubeId);
  const box = h("section", { class: "card seat", "aria-labelledby": "seat-title" });

  function render() {
    const kind = tokenKind(signedIn);
    if (seat) {
      replace(
        box,
        h("h3", { id: "seat-title" }, "Your seat"),
        h("p", {}, "You are ", h("strong", {}, seat.label), ` in role ${seat.roleName}.`),
        h("p", { class: "muted" }, "You post, ack and claim as this drone, and see what it sees."),
        h("button", { type: "button", onclick: () => leave() }, "Leave seat"),
      );
    } else if (kind === "client") {
      const ordered = [...options.roles()].sort((a, b) => Number(b.humanSeat ?? false) - Number(a.humanSeat ?? false));
      const select = h(
        "select",
        { id: "seat-role" },
        ordered.map((r) => h("option", { value: r.id }, `${r.name}${r.humanSeat ? " (human seat)" : ""}`)),
      );
      replace(
        box,
        h("h3", { id: "seat-title" }, "Take a seat"),
        h("p", { class: "muted" }, "Join the cube as a drone to post, ack and claim as a member of the team."),
        h(
          "form",
          { class: "row", onsubmit: (event: Event) => take(event, select.value) },
          h("label", { for: "seat-role" }, "Role"),
          select,
          h("button", { type: "submit", class: "primary" }, "Take seat"),
        ),
      );
    } else {
      replace(
        box,
        h("h3", { id: "seat-title" }, "Viewing as a user"),
        h(
          "p",
          { class: "muted" },
          "You see every entry of the cube. Sign in with a client token to take a human seat.",
        ),
      );
    }
  }

  async function take(event: Event, roleId: string) {
    event.preventDefault();
    try {
      const answer = await rpc<{ drone: Drone; sessionToken?: string }>(
        `${CUBE}.CubeService/AttachSeat`,
        { cubeId, roleId, hostname: "web console" },
        signedIn,
      );
      if (!answer.sessionToken) throw new Error("the cube did not issue a session token");
      seat = {
        droneId: answer.drone.id,
        label: answer.drone.label || "you",
        roleName: answer.drone.roleName ?? "",
        sessionToken: answer.sessionToken,
      };
      session.setSeat(cubeId, seat);
      options.clearError();
      options.announce(`Seated as ${seat.label}`);
      render();
      await options.seated();
    } catch (e) {
      options.failed(e);
    }
  }

  function leave() {
    seat = undefined;
    session.setSeat(cubeId, undefined);
    render();
    options.left();
  }

  return {
    box,
    /** The seat taken in this cube, if any. */
    current: () => seat,
    render,
    leave,
  };
}
