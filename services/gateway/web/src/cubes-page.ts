import { CUBE, type Cube, listAll, type Question, rpc } from "./api";
import { openQuestions, questionCountText } from "./coordination";
import { enumLabel, h, replace, time } from "./dom";
import { busy, FormErrors, field } from "./forms";
import type { ListContext, View } from "./lists";

/** The contract's limit on a directive and a taxonomy, in UTF-8 bytes. */
const MAX_DOCUMENT_BYTES = 100_000;

/**
 * The cube contract's taxonomy rules, checked as the admin types: the same messages the cube
 * service answers with (`taxonomy_json: must be valid JSON` / `must be a JSON object`).
 * Empty text means "no taxonomy" and is valid.
 */
export function taxonomyProblem(text: string): string | undefined {
  if (text.trim() === "") return undefined;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the service refuses exactly these.
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/.test(text)) return "must not contain control characters";
  if (new TextEncoder().encode(text).length > MAX_DOCUMENT_BYTES)
    return `must be at most ${MAX_DOCUMENT_BYTES.toLocaleString("en-US")} bytes`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return `must be valid JSON (${(e as Error).message})`;
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return "must be a JSON object";
  return undefined;
}

const TAXONOMY_HELP =
  'Optional. A JSON object naming the message kinds drones may tag posts with, e.g. {"kinds": ["status", "blocker", "handoff"]}. Leave empty for none.';

/** The directive and taxonomy fields with live taxonomy checking; used by create and edit. */
export function cubeDocumentFields(directive = "", taxonomy = "", savedKinds: readonly string[] = []) {
  const directiveField = field(
    "Directive",
    h("textarea", { name: "directive", rows: 4 }, directive),
    "directive",
    "The team's standing instructions: every drone reads them when it takes a seat.",
  );
  const taxonomyField = field(
    "Message taxonomy (JSON)",
    h("textarea", { name: "taxonomy_json", rows: 5, spellcheck: "false", class: "code" }, taxonomy),
    "taxonomy_json",
    TAXONOMY_HELP,
  );
  // The kinds as the cube service read the saved taxonomy (the contract carries them).
  const kinds = h("p", { class: "help kinds" }, savedKinds.length > 0 ? `Kinds: ${savedKinds.join(", ")}` : "");
  const check = () => {
    const text = taxonomyField.control.value;
    const problem = taxonomyProblem(text);
    taxonomyField.error.textContent = problem ?? "";
    if (problem) taxonomyField.control.setAttribute("aria-invalid", "true");
    else taxonomyField.control.removeAttribute("aria-invalid");
    return problem;
  };
  taxonomyField.control.addEventListener("input", check);
  taxonomyField.element.append(kinds);
  check();
  return { directiveField, taxonomyField, check };
}

/** The most cubes whose open questions the cubes page counts (one ListQuestions call each). */
const QUESTION_COUNT_CUBES = 50;
/** The page of questions read per cube; a full page reads as "50+". */
const QUESTION_PAGE = 50;

/** The cubes the signed-in principal can read, with their open questions, and a form to create one. */
export function cubesView(context: ListContext): View {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading cubes…"));
  const cubes: Cube[] = [];
  const asked = new Map<string, { count: number; more: boolean }>();
  const questionsBadge = (cube: Cube) => {
    const open = asked.get(cube.id);
    if (!open || open.count === 0) return null;
    return h(
      "a",
      { href: `#/cubes/${encodeURIComponent(cube.id)}`, class: "badge question", "data-open-questions": open.count },
      questionCountText(open.count, open.more),
      h("span", { class: "sr-only" }, ` in ${cube.name}`),
    );
  };
  const total = () => {
    if (asked.size === 0) return null;
    let count = 0;
    let more = false;
    for (const open of asked.values()) {
      count += open.count;
      more ||= open.more;
    }
    return h(
      "p",
      { class: "muted questions-total", role: "status" },
      `${questionCountText(count, more)} across ${asked.size === cubes.length ? "your" : `the first ${asked.size} of your`} cubes`,
    );
  };
  const render = () =>
    replace(
      body,
      total(),
      cubes.length === 0
        ? h("p", { class: "muted" }, "No cubes yet.")
        : h(
            "ul",
            { class: "cube-list" },
            cubes.map((cube) =>
              h(
                "li",
                { "data-cube-id": cube.id },
                h("a", { href: `#/cubes/${encodeURIComponent(cube.id)}`, class: "cube-link" }, cube.name),
                h("span", { class: "badge access" }, enumLabel(cube.callerAccess, "CUBE_ACCESS_")),
                questionsBadge(cube),
                cube.callerAccess === "CUBE_ACCESS_MANAGE"
                  ? h(
                      "a",
                      { href: `#/cubes/${encodeURIComponent(cube.id)}/manage`, class: "manage-link" },
                      "Manage",
                      h("span", { class: "sr-only" }, ` ${cube.name}`),
                    )
                  : null,
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
  const element = h(
    "div",
    { class: "stack" },
    h("section", { class: "card", "aria-labelledby": "cubes-title" }, h("h2", { id: "cubes-title" }, "Cubes"), body),
    createCubeForm(context, (cube) => {
      cubes.push(cube);
      render();
    }),
  );
  void listAll<Cube>(`${CUBE}.CubeService/ListCubes`, {}, "cubes", context.token).then(
    (list) => {
      cubes.push(...list);
      render();
      void countQuestions();
    },
    (e) => replace(body, h("p", { class: "error", role: "alert" }, (e as Error).message)),
  );
  /** Counts each cube's open questions (the first QUESTION_COUNT_CUBES cubes; a failed read counts none). */
  async function countQuestions() {
    await Promise.all(
      cubes.slice(0, QUESTION_COUNT_CUBES).map(async (cube) => {
        try {
          const answer = await rpc<{ questions?: Question[]; nextPageToken?: string }>(
            `${CUBE}.ActivityService/ListQuestions`,
            { cubeId: cube.id, pageSize: QUESTION_PAGE },
            context.token,
          );
          asked.set(cube.id, { count: openQuestions(answer.questions ?? []).length, more: !!answer.nextPageToken });
        } catch {
          // Not answerable (an older cube service, or no READ after all): no badge.
        }
      }),
    );
    render();
  }
  return { element, dispose() {} };
}

function createCubeForm(context: ListContext, created: (cube: Cube) => void): HTMLElement {
  const name = field("Name", h("input", { name: "name", required: true, maxlength: 200, autocomplete: "off" }), "name");
  const { directiveField, taxonomyField, check } = cubeDocumentFields();
  const errors = new FormErrors([name, directiveField, taxonomyField]);
  const submit = h("button", { type: "submit", class: "primary" }, "Create cube");
  // One request key per form fill: a retried submit after a lost answer creates the cube once.
  let requestKey = crypto.randomUUID();
  const form = h(
    "form",
    { class: "stack-form", "aria-labelledby": "create-cube-title", novalidate: true },
    name.element,
    directiveField.element,
    taxonomyField.element,
    errors.form,
    submit,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    errors.clear();
    if (!name.control.value.trim()) return void errors.at("name", "is required");
    const problem = check();
    if (problem) return void errors.at("taxonomy_json", problem);
    void busy(submit, async () => {
      try {
        const taxonomy = taxonomyField.control.value.trim();
        const { cube } = await rpc<{ cube: Cube }>(
          `${CUBE}.CubeService/CreateCube`,
          {
            requestKey,
            name: name.control.value.trim(),
            directive: directiveField.control.value,
            ...(taxonomy ? { taxonomyJson: taxonomy } : {}),
          },
          context.token,
        );
        requestKey = crypto.randomUUID();
        form.reset();
        check();
        created(cube);
        context.announce(`Cube ${cube.name} created`);
      } catch (e) {
        errors.show(e);
      }
    });
  });
  return h(
    "section",
    { class: "card", "aria-labelledby": "create-cube-title" },
    h("h2", { id: "create-cube-title" }, "Create a cube"),
    form,
  );
}
