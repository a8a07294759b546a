import { CUBE, type Cube, type Role, rpc } from "./api";
import { cubeDocumentFields } from "./cubes-page";
import { h, replace } from "./dom";
import { busy, FormErrors } from "./forms";
import type { ListContext, View } from "./lists";
import { rolesAdmin } from "./role-editor";
import { seatsAdmin } from "./seats";

/** A cube's admin page: directive and taxonomy, roles, and seats. Needs MANAGE to change. */
export function cubeManageView(cubeId: string, context: ListContext): View {
  const href = `#/cubes/${encodeURIComponent(cubeId)}`;
  const header = h("header", { class: "cube-header" }, h("h2", {}, "Loading cube…"));
  const settingsBox = h("section", { class: "card", "aria-labelledby": "settings-title" });
  const rolesBox = h("section", { class: "card", "aria-labelledby": "roles-admin-title" });
  const seatsBox = h("section", { class: "card", "aria-labelledby": "seats-title" });
  const element = h("div", { class: "stack manage" }, header, settingsBox, rolesBox, seatsBox);
  const seats = seatsAdmin(seatsBox, cubeId, context.token, context.announce);
  const timer = setInterval(() => void seats.refresh(), 15_000);

  const renderSettings = (cube: Cube) => {
    const { directiveField, taxonomyField, check } = cubeDocumentFields(
      cube.directive ?? "",
      cube.taxonomyJson ?? "",
      cube.taxonomyKinds ?? [],
    );
    const errors = new FormErrors([directiveField, taxonomyField]);
    const submit = h("button", { type: "submit", class: "primary" }, "Save directive and taxonomy");
    const saved = h("p", { class: "ok", role: "status" });
    const form = h(
      "form",
      { class: "stack-form", novalidate: true, "aria-labelledby": "settings-title" },
      directiveField.element,
      taxonomyField.element,
      errors.form,
      h("div", { class: "row" }, submit, saved),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      errors.clear();
      saved.textContent = "";
      const problem = check();
      if (problem) return void errors.at("taxonomy_json", problem);
      const change: Record<string, string> = {};
      if (directiveField.control.value !== (cube.directive ?? "")) change.directive = directiveField.control.value;
      if (taxonomyField.control.value.trim() !== (cube.taxonomyJson ?? ""))
        change.taxonomyJson = taxonomyField.control.value.trim();
      if (Object.keys(change).length === 0) {
        saved.textContent = "Nothing changed";
        return;
      }
      void busy(submit, async () => {
        try {
          const answer = await rpc<{ cube: Cube }>(
            `${CUBE}.CubeService/UpdateCube`,
            { cubeId, ...change },
            context.token,
          );
          cube = answer.cube;
          saved.textContent = "Saved";
          context.announce("Directive and taxonomy saved");
        } catch (e) {
          errors.show(e);
        }
      });
    });
    replace(settingsBox, h("h3", { id: "settings-title" }, "Directive and taxonomy"), form);
  };

  void (async () => {
    try {
      const [{ cube }, roles] = await Promise.all([
        rpc<{ cube: Cube }>(`${CUBE}.CubeService/GetCube`, { cubeId }, context.token),
        rpc<{ roles?: Role[] }>(`${CUBE}.CubeService/ListRoles`, { cubeId, pageSize: 500 }, context.token),
      ]);
      document.title = `Manage ${cube.name} · Unimatrix`;
      const manage = cube.callerAccess === "CUBE_ACCESS_MANAGE";
      replace(
        header,
        h("div", { class: "title-row" }, h("h2", {}, `Manage ${cube.name}`), h("a", { href }, "Open the cube")),
        manage
          ? null
          : h(
              "p",
              { class: "error", role: "alert" },
              "You can read this cube but not manage it: changes will be refused.",
            ),
      );
      renderSettings(cube);
      rolesAdmin(rolesBox, cubeId, context.token, roles.roles ?? [], context.announce);
      await seats.refresh();
    } catch (e) {
      replace(header, h("h2", {}, "Manage cube"), h("p", { class: "error", role: "alert" }, (e as Error).message));
    }
  })();
  return { element, dispose: () => clearInterval(timer) };
}
