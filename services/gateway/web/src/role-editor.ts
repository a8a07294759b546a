import { CUBE, type Role, rpc } from "./api";
import { h, replace } from "./dom";
import { busy, type Field, FormErrors, field, flag } from "./forms";

/** The role flags, each with what it does, as the cube contract defines it. */
const ROLE_FLAGS = [
  [
    "isDefault",
    "is_default",
    "Default role",
    "A seat attached without naming a role lands here. One per cube: setting it clears the previous default.",
  ],
  ["mandatory", "mandatory", "Mandatory", "The team is expected to always have a seat in this role."],
  [
    "humanSeat",
    "human_seat",
    "Human seat",
    "Seats in this role are held by a person (e.g. in this console), not an agent.",
  ],
  [
    "canBroadcast",
    "can_broadcast",
    "Can broadcast",
    "Drones in this role may post to everyone; without it they can only post direct entries.",
  ],
  [
    "receivesAllDirect",
    "receives_all_direct",
    "Receives all direct entries",
    "Drones in this role see every direct entry in the cube, whoever it is addressed to (e.g. a queen overseeing the team).",
  ],
] as const;

type FlagKey = (typeof ROLE_FLAGS)[number][0];

/** The `## <section>` headings of a role's detailed description, in order. */
export function sections(description: string): string[] {
  return [...description.matchAll(/^## (.+)$/gm)].map((m) => (m[1] as string).trim());
}

/** A role form: create when `role` is undefined, else edit. Calls `saved` with the stored role. */
function roleForm(
  cubeId: string,
  token: string,
  role: Role | undefined,
  saved: (role: Role) => void,
  cancel?: () => void,
): HTMLElement {
  const name = field(
    "Role name",
    h("input", { name: "name", required: true, maxlength: 100, autocomplete: "off", value: role?.name ?? "" }),
    "name",
  );
  const short = field(
    "Short description",
    h("input", { name: "short_description", maxlength: 500, autocomplete: "off", value: role?.shortDescription ?? "" }),
    "short_description",
    "One line drones see next to the role name.",
  );
  const detailed = field(
    "Detailed description (Markdown)",
    h("textarea", { name: "detailed_description", rows: 6, class: "code" }, role?.detailedDescription ?? ""),
    "detailed_description",
    "The role's full brief. Each “## Heading” line starts a section that can later be added, replaced or removed on its own.",
  );
  const queen = role?.roleClass === "ROLE_CLASS_QUEEN";
  const roleClass = field(
    "Class",
    h(
      "select",
      { name: "role_class" },
      h("option", { value: "ROLE_CLASS_WORKER", selected: !queen }, "Worker"),
      h("option", { value: "ROLE_CLASS_QUEEN", selected: queen }, "Queen"),
    ),
    "role_class",
    "A queen coordinates the team (assigns, reviews, decides); workers do the work.",
  );
  const flags = Object.fromEntries(
    ROLE_FLAGS.map(([key, api, label, why]) => [
      key,
      flag(label, api, why, role ? role[key] === true : key === "canBroadcast"),
    ]),
  ) as Record<FlagKey, Field<HTMLInputElement>>;
  const all: Field[] = [name, short, detailed, roleClass, ...Object.values(flags)];
  const errors = new FormErrors(all);
  const submit = h("button", { type: "submit", class: "primary" }, role ? "Save role" : "Create role");
  const form = h(
    "form",
    { class: "stack-form role-form", novalidate: true, "aria-label": role ? `Edit role ${role.name}` : "New role" },
    name.element,
    short.element,
    roleClass.element,
    h(
      "fieldset",
      { class: "flags" },
      h("legend", {}, "Flags"),
      Object.values(flags).map((f) => f.element),
    ),
    detailed.element,
    errors.form,
    h("div", { class: "row" }, submit, cancel ? h("button", { type: "button", onclick: cancel }, "Cancel") : null),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    errors.clear();
    if (!name.control.value.trim()) return void errors.at("name", "is required");
    const values: Record<string, unknown> = {
      name: name.control.value.trim(),
      shortDescription: short.control.value,
      detailedDescription: detailed.control.value,
      roleClass: roleClass.control.value,
      ...Object.fromEntries(ROLE_FLAGS.map(([key]) => [key, flags[key].control.checked])),
    };
    void busy(submit, async () => {
      try {
        let answer: { role: Role };
        if (role) {
          // Only what changed: unset fields stay as they are.
          const current: Record<string, unknown> = { ...role, roleClass: role.roleClass ?? "ROLE_CLASS_WORKER" };
          const changed = Object.fromEntries(
            Object.entries(values).filter(([k, v]) => (current[k] ?? (typeof v === "boolean" ? false : "")) !== v),
          );
          answer = await rpc(`${CUBE}.CubeService/UpdateRole`, { cubeId, roleId: role.id, ...changed }, token);
        } else {
          answer = await rpc(`${CUBE}.CubeService/CreateRole`, { cubeId, ...values }, token);
        }
        saved(answer.role);
      } catch (e) {
        errors.show(e);
      }
    });
  });
  return form;
}

/** Adds, replaces or removes one `## section` of a role's detailed description. */
function sectionForm(cubeId: string, token: string, role: Role, saved: (role: Role) => void): HTMLElement {
  const known = sections(role.detailedDescription ?? "");
  const op = field(
    "Change",
    h(
      "select",
      { name: "op" },
      h("option", { value: "ROLE_SECTION_OP_ADD" }, "Add a section"),
      h("option", { value: "ROLE_SECTION_OP_REPLACE" }, "Replace a section's text"),
      h("option", { value: "ROLE_SECTION_OP_REMOVE" }, "Remove a section"),
    ),
    "op",
  );
  const section = field(
    "Section heading",
    h("input", { name: "section", maxlength: 200, autocomplete: "off", list: `sections-${role.id}` }),
    "section",
    known.length > 0 ? `Existing: ${known.join(", ")}` : "The role has no sections yet.",
  );
  const text = field("Section text", h("textarea", { name: "text", rows: 3 }), "text", "Empty when removing.");
  const errors = new FormErrors([op, section, text]);
  const submit = h("button", { type: "submit" }, "Apply");
  const form = h(
    "form",
    { class: "stack-form", novalidate: true, "aria-label": `Sections of ${role.name}` },
    h(
      "datalist",
      { id: `sections-${role.id}` },
      known.map((s) => h("option", { value: s })),
    ),
    op.element,
    section.element,
    text.element,
    errors.form,
    submit,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    errors.clear();
    void busy(submit, async () => {
      try {
        const answer = await rpc<{ role: Role }>(
          `${CUBE}.CubeService/PatchRoleSection`,
          { cubeId, roleId: role.id, op: op.control.value, section: section.control.value, text: text.control.value },
          token,
        );
        saved(answer.role);
      } catch (e) {
        errors.show(e);
      }
    });
  });
  return h("details", { class: "sections" }, h("summary", {}, "Edit one section"), form);
}

/** The roles card of the manage page: each role with its flags, an editor, and a new-role form. */
export function rolesAdmin(
  box: HTMLElement,
  cubeId: string,
  token: string,
  roles: Role[],
  announce: (m: string) => void,
): void {
  let editing: string | undefined;
  const render = () => {
    roles.sort((a, b) => a.name.localeCompare(b.name));
    replace(
      box,
      h("h3", { id: "roles-admin-title" }, `Roles (${roles.length})`),
      h(
        "ul",
        { class: "plain roles-admin" },
        roles.map((role) => {
          const save = (stored: Role) => {
            editing = undefined;
            const index = roles.findIndex((r) => r.id === stored.id);
            // A new default clears the previous one.
            if (stored.isDefault) for (const r of roles) r.isDefault = false;
            roles[index] = stored;
            render();
            announce(`Role ${stored.name} saved`);
          };
          return h(
            "li",
            { "data-role-id": role.id },
            h(
              "div",
              { class: "title-row" },
              h("strong", {}, role.name),
              h("span", { class: "badge" }, role.roleClass === "ROLE_CLASS_QUEEN" ? "queen" : "worker"),
              ROLE_FLAGS.filter(([key]) => role[key]).map(([, , label]) =>
                h("span", { class: "badge" }, label.toLowerCase()),
              ),
              editing === role.id
                ? null
                : h(
                    "button",
                    {
                      type: "button",
                      class: "small",
                      onclick: () => {
                        editing = role.id;
                        render();
                      },
                    },
                    "Edit",
                    h("span", { class: "sr-only" }, ` ${role.name}`),
                  ),
            ),
            role.shortDescription ? h("div", { class: "muted" }, role.shortDescription) : null,
            editing === role.id
              ? [
                  roleForm(cubeId, token, role, save, () => {
                    editing = undefined;
                    render();
                  }),
                  sectionForm(cubeId, token, role, save),
                ]
              : null,
          );
        }),
      ),
      h(
        "details",
        { class: "new-role", open: roles.length === 0 },
        h("summary", {}, "New role"),
        roleForm(cubeId, token, undefined, (role) => {
          if (role.isDefault) for (const r of roles) r.isDefault = false;
          roles.push(role);
          render();
          announce(`Role ${role.name} created`);
        }),
      ),
    );
    // The form just opened takes the focus (the Edit button that opened it is gone).
    if (editing) box.querySelector<HTMLInputElement>(`[data-role-id="${editing}"] input[name=name]`)?.focus();
  };
  render();
}
