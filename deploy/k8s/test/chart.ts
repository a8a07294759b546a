// Reading the chart without Helm: its files, Helm's value merge, the schema, and a template
// "blanker" that turns a template into the YAML skeleton it renders.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Ajv, { type ErrorObject, type ValidateFunction } from "ajv";
import YAML from "yaml";

/** The repository root. */
export const root = join(__dirname, "..", "..", "..");
/** The chart directory. */
export const chartDir = join(root, "deploy", "k8s", "unimatrix");
/** The example values files. */
export const examplesDir = join(root, "deploy", "k8s", "examples");

export type Values = Record<string, unknown>;

/** Reads a YAML file as one document; duplicate keys and syntax errors throw. */
export function readYaml(path: string): Values {
  return YAML.parse(readFileSync(path, "utf8"), { uniqueKeys: true }) as Values;
}

/** The chart's default values. */
export function defaultValues(): Values {
  return readYaml(join(chartDir, "values.yaml"));
}

/** Every example values file, by file name. */
export function exampleFiles(): string[] {
  return readdirSync(examplesDir)
    .filter((file) => file.endsWith(".yaml"))
    .sort();
}

/** Every template file (name -> text). */
export function templates(): Map<string, string> {
  const dir = join(chartDir, "templates");
  return new Map(
    readdirSync(dir, { recursive: true, encoding: "utf8" })
      .filter((file) => /\.(ya?ml|tpl|txt)$/.test(file))
      .sort()
      .map((file) => [file, readFileSync(join(dir, file), "utf8")]),
  );
}

const isMap = (value: unknown): value is Values => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Helm's merge of user values over defaults: maps merge key by key, anything else (lists
 * included) replaces, and a null given by the user deletes the key.
 */
export function mergeValues(defaults: Values, override: Values): Values {
  const out: Values = { ...defaults };
  for (const [key, value] of Object.entries(override)) {
    if (value === null) delete out[key];
    else if (isMap(value) && isMap(out[key])) out[key] = mergeValues(out[key] as Values, value);
    else out[key] = value;
  }
  return out;
}

/** Deep copy with one value set at a dotted path (creating maps on the way). */
export function withValue(values: Values, path: string, value: unknown): Values {
  const copy = structuredClone(values);
  const keys = path.split(".");
  let cursor: Values = copy;
  for (const key of keys.slice(0, -1)) {
    if (!isMap(cursor[key])) cursor[key] = {};
    cursor = cursor[key] as Values;
  }
  cursor[keys[keys.length - 1]!] = value;
  return copy;
}

/** The compiled values.schema.json. */
export function schemaValidator(): ValidateFunction {
  const schema = JSON.parse(readFileSync(join(chartDir, "values.schema.json"), "utf8"));
  return new Ajv({ allErrors: true, strict: true, allowUnionTypes: true }).compile(schema);
}

/** Validation errors as "path: message" lines (empty when valid). */
export function schemaErrors(validate: ValidateFunction, values: Values): string[] {
  if (validate(values)) return [];
  return (validate.errors ?? []).map((error: ErrorObject) => `${error.instancePath || "/"}: ${error.message}`);
}

/** Looks a dotted path up in a tree (numeric keys index lists); not found when some key is missing. */
export function lookup(values: unknown, path: readonly string[]): { found: boolean; value?: unknown } {
  let cursor: unknown = values;
  for (const key of path) {
    if (Array.isArray(cursor) && /^\d+$/.test(key) && Number(key) < cursor.length) cursor = cursor[Number(key)];
    else if (isMap(cursor) && Object.hasOwn(cursor, key)) cursor = cursor[key];
    else return { found: false };
  }
  return { found: true, value: cursor };
}

/** Every leaf path of a values tree (an empty map or any non-map value is a leaf). */
export function leafPaths(values: unknown, prefix: string[] = []): string[][] {
  if (!isMap(values) || Object.keys(values).length === 0) return [prefix];
  return Object.entries(values).flatMap(([key, value]) => leafPaths(value, [...prefix, key]));
}

/** A `{{ ... }}` action of a template, with its position. */
interface Action {
  readonly start: number;
  readonly end: number;
  /** The action's body without delimiters, trim markers and surrounding space. */
  readonly body: string;
}

const ACTION = /\{\{-?\s*([\s\S]*?)\s*-?\}\}/g;

function actions(text: string): Action[] {
  return [...text.matchAll(ACTION)].map((m) => ({ start: m.index, end: m.index + m[0].length, body: m[1]! }));
}

const OPENS = /^(if|range|with|define|block)\b/;
const isEnd = (body: string) => /^end\b/.test(body);
const isElse = (body: string) => /^else\b/.test(body);

/** Checks that every if/range/with/define/block has its end and every else sits inside one. */
export function blockErrors(text: string): string[] {
  const errors: string[] = [];
  const stack: string[] = [];
  for (const action of actions(text)) {
    const opens = OPENS.exec(action.body);
    if (opens) stack.push(opens[1]!);
    else if (isEnd(action.body)) {
      if (stack.pop() === undefined) errors.push(`{{ end }} at offset ${action.start} closes nothing`);
    } else if (isElse(action.body) && !["if", "with", "range"].includes(stack[stack.length - 1] ?? "")) {
      errors.push(`{{ else }} at offset ${action.start} outside if/with/range`);
    }
  }
  for (const open of stack) errors.push(`{{ ${open} }} is never closed`);
  return errors;
}

/**
 * The YAML skeleton of a template: `{{ else }}` branches are dropped (so the two arms of an if do
 * not both land in the output), lines holding only actions are removed, and the remaining inline
 * actions become the placeholder `x` (`x1`, `x2`... where an action is a map key).
 */
export function blank(text: string): string {
  const all = actions(text);
  const kept: Action[] = [];
  const dropped: { start: number; end: number }[] = [];
  for (let i = 0; i < all.length; i++) {
    const action = all[i]!;
    kept.push(action);
    if (!isElse(action.body)) continue;
    // Skip to the end of the enclosing block.
    let depth = 0;
    let j = i + 1;
    for (; j < all.length; j++) {
      const body = all[j]!.body;
      if (OPENS.test(body)) depth++;
      else if (isEnd(body)) {
        if (depth === 0) break;
        depth--;
      }
    }
    if (j >= all.length) throw new Error(`unclosed {{ else }} at offset ${action.start}`);
    dropped.push({ start: action.end, end: all[j]!.start });
    i = j - 1;
  }
  const MARK = "\u0000";
  // Actions in key position become distinct keys (x1, x2...), so ranged maps do not collide.
  let keys = 0;
  let out = "";
  let at = 0;
  const cuts = [
    ...kept.map((a) => ({ start: a.start, end: a.end, text: MARK })),
    ...dropped.map((d) => ({ ...d, text: "" })),
  ].sort((a, b) => a.start - b.start);
  for (const cut of cuts) {
    if (cut.start < at) continue;
    out += text.slice(at, cut.start) + cut.text;
    at = cut.end;
  }
  out += text.slice(at);
  return out
    .split("\n")
    .filter((line) => !(line.includes(MARK) && line.replaceAll(MARK, "").trim() === ""))
    .map((line) => line.replaceAll(`${MARK}:`, () => `x${++keys}:`).replaceAll(MARK, "x"))
    .join("\n");
}

/** The YAML documents of a blanked template; throws on the first syntax error. */
export function skeleton(text: string): Values[] {
  const docs = YAML.parseAllDocuments(blank(text), { uniqueKeys: true });
  const out: Values[] = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new Error(doc.errors.map((e) => e.message).join("\n"));
    const value = doc.toJS();
    if (value !== null && value !== undefined) out.push(value as Values);
  }
  return out;
}

/** Every `.Values.a.b` path a text references (from `.Values`, `$.Values`, `$root.Values`, `.root.Values`). */
export function valuesReferences(text: string): string[][] {
  return [...text.matchAll(/\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)].map((m) => m[1]!.slice(1).split("."));
}

/** Every `$svc.a.b` path a text references (`$svc` ranges over `.Values.services`). */
export function serviceReferences(text: string): string[][] {
  return [...text.matchAll(/\$svc((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)].map((m) => m[1]!.slice(1).split("."));
}

const WHOLESALE = /^(resources|annotations|podSecurityContext|containerSecurityContext|hosts|tls|topologyKeys)$/;

/**
 * Keys of a values file with no comment line right above them ("line: text"). Every leaf key
 * ("key: value") needs one; blocks documented as a whole (resources, annotations, security
 * contexts, ingress hosts) need it above their head only.
 */
export function undocumentedKeys(text: string): string[] {
  const lines = text.split("\n");
  const undocumented: string[] = [];
  const ancestors: { indent: number; key: string }[] = [];
  lines.forEach((line, i) => {
    const match = /^(\s*)([A-Za-z_][\w./-]*):(.*)$/.exec(line);
    if (!match) return;
    const indent = match[1]!.length;
    while (ancestors.length > 0 && ancestors[ancestors.length - 1]!.indent >= indent) ancestors.pop();
    const inWholesale = ancestors.some((a) => WHOLESALE.test(a.key));
    ancestors.push({ indent, key: match[2]! });
    if (inWholesale) return;
    const isLeaf = match[3]!.trim() !== "";
    if ((isLeaf || WHOLESALE.test(match[2]!)) && !/^\s*#/.test(lines[i - 1] ?? "")) {
      undocumented.push(`${i + 1}: ${line.trim()}`);
    }
  });
  return undocumented;
}
