import { type Client, CUBE, type Cube, type Grant, IDENTITY, listAll, rpc } from "./api";
import { h, replace, time } from "./dom";
import { busy, FormErrors, field, hookSettings, mcpSettings, plainHookCommand, secretBox, uid } from "./forms";
import type { ListContext, View } from "./lists";

const ACCESS = [
  ["", "No access"],
  ["CUBE_ACCESS_READ", "Read (observer)"],
  ["CUBE_ACCESS_WRITE", "Write (participant)"],
  ["CUBE_ACCESS_MANAGE", "Manage"],
] as const;

/** The tenant's API clients with their grants: issue, grant per cube, rotate, revoke. */
export function clientsView(context: ListContext): View {
  let clients: Client[] = [];
  let cubes: Cube[] = [];
  let grants: Grant[] = [];
  let confirming: { id: string; action: "rotate" | "revoke" } | undefined;
  const secrets = h("div", { class: "secrets" });
  const body = h("div", {}, h("p", { class: "muted" }, "Loading clients…"));
  const listError = h("p", { class: "error", role: "alert" });

  const name = field(
    "Client name",
    h("input", { name: "name", required: true, maxlength: 200, autocomplete: "off" }),
    "name",
    "One client per agent host or person, e.g. “queen”, “worker-laptop”, “observer”.",
  );
  const errors = new FormErrors([name]);
  const issue = h("button", { type: "submit", class: "primary" }, "Issue client");
  const form = h(
    "form",
    { class: "row-form", novalidate: true, "aria-labelledby": "issue-title" },
    name.element,
    issue,
    errors.form,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    errors.clear();
    if (!name.control.value.trim()) return void errors.at("name", "is required");
    void busy(issue, async () => {
      try {
        const answer = await rpc<{ client: Client; token: string }>(
          `${IDENTITY}/IssueClient`,
          { name: name.control.value.trim() },
          context.token,
        );
        form.reset();
        clients.push(answer.client);
        render();
        showSecret(`Client ${answer.client.name} issued`, answer.token);
        context.announce(`Client ${answer.client.name} issued; copy its token now`);
      } catch (e) {
        errors.show(e);
      }
    });
  });

  const showSecret = (title: string, token: string, extra = "") =>
    secrets.replaceChildren(
      secretBox(
        title,
        token,
        `${extra}This token is shown once and cannot be read again. Give it a grant below, then paste the MCP settings into the agent's MCP client.`,
        { label: "MCP settings", text: mcpSettings(token) },
      ),
    );

  const accessOf = (clientId: string, cubeId: string) =>
    grants.find((g) => g.clientId === clientId && g.cubeId === cubeId)?.access ?? "";

  const grantRow = (client: Client, cube: Cube) => {
    const id = uid("grant");
    const select = h(
      "select",
      { id, name: "access", disabled: Boolean(client.revokedAt) },
      ACCESS.map(([value, label]) => h("option", { value, selected: accessOf(client.id, cube.id) === value }, label)),
    );
    const status = h("span", { class: "field-error", role: "alert", id: `${id}-error` });
    select.setAttribute("aria-describedby", status.id);
    const set = h(
      "button",
      { type: "button", class: "small", disabled: Boolean(client.revokedAt) },
      "Set",
      h("span", { class: "sr-only" }, ` access of ${client.name} to ${cube.name}`),
    );
    set.addEventListener("click", () =>
      busy(set, async () => {
        status.textContent = "";
        try {
          if (select.value === "") {
            await rpc(`${IDENTITY}/RevokeCubeGrant`, { clientId: client.id, cubeId: cube.id }, context.token);
            grants = grants.filter((g) => !(g.clientId === client.id && g.cubeId === cube.id));
          } else {
            const { grant } = await rpc<{ grant: Grant }>(
              `${IDENTITY}/SetCubeGrant`,
              { clientId: client.id, cubeId: cube.id, access: select.value },
              context.token,
            );
            grants = [...grants.filter((g) => !(g.clientId === client.id && g.cubeId === cube.id)), grant];
          }
          context.announce(`${client.name}: ${select.selectedOptions[0]?.textContent ?? ""} on ${cube.name}`);
          render();
        } catch (e) {
          status.textContent = (e as Error).message;
        }
      }),
    );
    return h(
      "tr",
      { "data-cube-id": cube.id },
      h("th", { scope: "row" }, h("label", { for: id }, cube.name)),
      h("td", {}, select, status),
      h("td", {}, set),
    );
  };

  const act = async (client: Client, action: "rotate" | "revoke") => {
    try {
      if (action === "rotate") {
        const answer = await rpc<{ client: Client; token: string; revokedSessionCount?: number }>(
          `${IDENTITY}/RotateClientCredential`,
          { clientId: client.id },
          context.token,
        );
        clients = clients.map((c) => (c.id === client.id ? answer.client : c));
        const ended = answer.revokedSessionCount ?? 0;
        showSecret(
          `New token for ${client.name}`,
          answer.token,
          `The old token no longer works; ${ended} drone session${ended === 1 ? "" : "s"} ended. `,
        );
        context.announce(`Credential of ${client.name} rotated; ${ended} drone sessions ended`);
      } else {
        const answer = await rpc<{ client: Client }>(
          `${IDENTITY}/RevokeClient`,
          { clientId: client.id },
          context.token,
        );
        clients = clients.map((c) => (c.id === client.id ? answer.client : c));
        context.announce(`Client ${client.name} revoked`);
      }
      confirming = undefined;
      listError.textContent = "";
      render();
    } catch (e) {
      listError.textContent = (e as Error).message;
    }
  };

  const actions = (client: Client) => {
    if (client.revokedAt) return h("span", { class: "badge warn" }, "revoked");
    if (confirming?.id === client.id) {
      const rotate = confirming.action === "rotate";
      return h(
        "div",
        { class: "confirm", role: "group", "aria-label": `Confirm ${confirming.action}` },
        h(
          "p",
          {},
          rotate
            ? `Rotate the credential of ${client.name}? The current token stops working at once and every drone session it opened ends (its agents must reconnect with the new token).`
            : `Revoke ${client.name}? Its token stops working, every drone session it opened ends, and this cannot be undone.`,
        ),
        h(
          "button",
          { type: "button", class: "small danger", onclick: () => void act(client, confirming!.action) },
          rotate ? "Confirm rotation" : "Confirm revocation",
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
      );
    }
    const ask = (action: "rotate" | "revoke") => () => {
      confirming = { id: client.id, action };
      render();
    };
    return h(
      "div",
      { class: "row" },
      h(
        "button",
        { type: "button", class: "small", onclick: ask("rotate") },
        "Rotate credential",
        h("span", { class: "sr-only" }, ` of ${client.name}`),
      ),
      h(
        "button",
        { type: "button", class: "small", onclick: ask("revoke") },
        "Revoke",
        h("span", { class: "sr-only" }, ` ${client.name}`),
      ),
    );
  };

  const render = () => {
    const focused = document.activeElement?.closest("[data-client-id]")?.getAttribute("data-client-id");
    replace(
      body,
      listError,
      clients.length === 0
        ? h("p", { class: "muted" }, "No clients yet.")
        : h(
            "ul",
            { class: "plain clients" },
            clients.map((client) =>
              h(
                "li",
                { "data-client-id": client.id, class: client.revokedAt ? "revoked" : undefined },
                h("div", { class: "title-row" }, h("h3", {}, client.name), actions(client)),
                h(
                  "p",
                  { class: "muted" },
                  "Issued ",
                  time(client.createdAt),
                  " · credential from ",
                  time(client.credentialIssuedAt),
                ),
                cubes.length === 0
                  ? h("p", { class: "muted" }, "No cubes to grant yet.")
                  : h(
                      "table",
                      { class: "grants" },
                      h("caption", {}, `Grants of ${client.name}`),
                      h(
                        "thead",
                        {},
                        h(
                          "tr",
                          {},
                          h("th", { scope: "col" }, "Cube"),
                          h("th", { scope: "col" }, "Access"),
                          h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Action")),
                        ),
                      ),
                      h(
                        "tbody",
                        {},
                        cubes.map((cube) => grantRow(client, cube)),
                      ),
                    ),
              ),
            ),
          ),
    );
    if (focused) body.querySelector<HTMLElement>(`[data-client-id="${focused}"] button:not([disabled])`)?.focus();
  };

  const element = h(
    "div",
    { class: "stack" },
    h(
      "section",
      { class: "card", "aria-labelledby": "issue-title" },
      h("h2", { id: "issue-title" }, "Issue a client"),
      h(
        "p",
        { class: "help" },
        "A client is an agent host's identity. Its token attaches seats over MCP; its grants say what it may do in each cube: read makes its drones observers, write makes them participants.",
      ),
      form,
      secrets,
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "clients-title" },
      h("h2", { id: "clients-title" }, "Clients and grants"),
      body,
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "hooks-title" },
      h("h2", { id: "hooks-title" }, "Agent hooks"),
      h(
        "p",
        { class: "help" },
        "Messages reach a busy agent between its tool calls: the host runs `unimatrix-hook` (the fast client of `unimatrix hook`, in @unimatrix/machine) with the seat's drone token in UNIMATRIX_DRONE_TOKEN; it asks the machine daemon, or this gateway when none runs. Claude Code (.claude/settings.json):",
      ),
      h("pre", { class: "snippet" }, hookSettings()),
      h("p", { class: "help" }, "Any other host that adds a command's stdout to the agent's context (plain lines):"),
      h("pre", { class: "snippet" }, plainHookCommand()),
    ),
  );
  void (async () => {
    try {
      [clients, cubes, grants] = await Promise.all([
        listAll<Client>(`${IDENTITY}/ListClients`, { includeRevoked: true }, "clients", context.token),
        listAll<Cube>(`${CUBE}.CubeService/ListCubes`, {}, "cubes", context.token),
        listAll<Grant>(`${IDENTITY}/ListCubeGrants`, {}, "grants", context.token),
      ]);
      render();
    } catch (e) {
      replace(body, h("p", { class: "error", role: "alert" }, (e as Error).message));
    }
  })();
  return { element, dispose() {} };
}
