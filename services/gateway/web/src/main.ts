import { ApiError, COOKIE_SESSION, CUBE, rpc, session, signInOptions, tokenKind } from "./api";
import { auditView } from "./audit-page";
import { clientsView } from "./clients-page";
import { cubeManageView } from "./cube-manage";
import { cubeView } from "./cube-view";
import { cubesView } from "./cubes-page";
import { devicesView } from "./devices-page";
import { h, refreshTimes, replace } from "./dom";
import type { StreamState } from "./events";
import { machinesView, type View } from "./lists";

const main = document.getElementById("main") as HTMLElement;
const nav = document.getElementById("nav") as HTMLElement;
const streamStatus = document.getElementById("stream-status") as HTMLElement;
const announcer = document.getElementById("announcer") as HTMLElement;
const account = document.getElementById("account") as HTMLElement;
let current: View | undefined;

const STATE_TEXT: Record<StreamState, string> = {
  connecting: "connecting…",
  live: "live",
  reconnecting: "reconnecting…",
  ended: "disconnected",
};

function setStreamState(state: StreamState | "idle", detail = "") {
  streamStatus.dataset.state = state;
  streamStatus.hidden = state === "idle";
  if (state === "idle") return;
  streamStatus.textContent = STATE_TEXT[state];
  streamStatus.title = detail;
}

function announce(message: string) {
  announcer.textContent = "";
  window.setTimeout(() => {
    announcer.textContent = message;
  }, 30);
}

/** The identity provider the gateway offers ("Sign in with <name>"), once asked. */
let provider: { name: string } | null = null;

function signInView(message?: string): View {
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "token-help",
  });
  const error = h("p", { class: "error", role: "alert", id: "signin-error" }, message ?? "");
  const submit = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h(
    "form",
    { class: "card signin", "aria-labelledby": "signin-title" },
    h("h2", { id: "signin-title" }, "Sign in"),
    provider
      ? h(
          "p",
          {},
          h(
            "a",
            { class: "button primary", href: "/auth/oidc/login", id: "signin-provider" },
            `Sign in with ${provider.name}`,
          ),
        )
      : null,
    provider ? h("p", { class: "muted" }, "Or paste a token:") : null,
    h("label", { for: "token" }, "Access token"),
    input,
    h(
      "p",
      { id: "token-help", class: "muted" },
      "A user token (umx_user_…) runs your tenant: cubes, roles, clients and grants, machines and devices. A client token (umx_client_…) can take a human seat in a cube. The token stays in this tab only.",
    ),
    error,
    submit,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!tokenKind(token)) {
      error.textContent = "That is not a user or client token (umx_user_… or umx_client_…).";
      input.focus();
      return;
    }
    submit.disabled = true;
    try {
      await rpc(`${CUBE}.CubeService/ListCubes`, { pageSize: 1 }, token);
      session.signIn(token);
      if (!location.hash || location.hash === "#/signin") location.hash = "#/cubes";
      route();
    } catch (e) {
      error.textContent =
        e instanceof ApiError && e.code === "unauthenticated"
          ? "The gateway did not accept that token."
          : `Sign-in failed: ${(e as Error).message}`;
      input.select();
    } finally {
      submit.disabled = false;
    }
  });
  queueMicrotask(() => input.focus());
  return { element: form, dispose() {} };
}

function renderChrome(token: string | undefined) {
  const path = location.hash.replace(/^#/, "") || "/cubes";
  const link = (href: string, label: string) =>
    h("a", { href: `#${href}`, "aria-current": path.startsWith(href) ? "page" : undefined }, label);
  replace(
    nav,
    token
      ? [
          link("/cubes", "Cubes"),
          tokenKind(token) === "user" ? link("/clients", "Clients") : null,
          link("/machines", "Machines"),
          link("/devices", "Devices"),
          link("/audit", "Audit"),
        ]
      : [],
  );
  replace(
    account,
    token
      ? [
          h(
            "span",
            { class: "account-kind" },
            token === COOKIE_SESSION
              ? `signed in through ${provider?.name ?? "your identity provider"}`
              : `signed in with a ${tokenKind(token)} token`,
          ),
          h(
            "button",
            {
              type: "button",
              onclick: () => {
                session.signOut();
                location.hash = "#/signin";
                route();
              },
            },
            "Sign out",
          ),
        ]
      : [],
  );
}

function route() {
  current?.dispose();
  setStreamState("idle");
  const token = session.token;
  renderChrome(token);
  const context = { token: token ?? "", setStreamState, announce };
  const path = location.hash.replace(/^#/, "") || "/cubes";
  document.title = "Unimatrix console";
  if (!token) current = signInView();
  else if (/^\/cubes\/[^/]+\/manage$/.test(path))
    current = cubeManageView(decodeURIComponent(path.split("/")[2] as string), context);
  else if (path.startsWith("/cubes/")) current = cubeView(decodeURIComponent(path.slice("/cubes/".length)), context);
  else if (path === "/clients") current = clientsView(context);
  else if (path === "/audit") current = auditView(context);
  else if (path === "/machines") current = machinesView(context);
  else if (path === "/devices") current = devicesView(context);
  else current = cubesView(context);
  replace(main, current.element);
  main.focus({ preventScroll: true });
}

window.addEventListener("hashchange", route);
window.setInterval(() => refreshTimes(document), 15_000);
// A session opened through the identity provider lives in an HttpOnly cookie: ask the gateway.
void signInOptions().then((options) => {
  provider = options.provider;
  if (options.signedIn && !session.token) session.signIn(COOKIE_SESSION);
  // A provider session that ended meanwhile (expired, signed out in another tab): back to signing in.
  if (!options.signedIn && session.token === COOKIE_SESSION) sessionStorage.clear();
  route();
});
