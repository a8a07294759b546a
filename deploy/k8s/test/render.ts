// A small renderer for the subset of Helm's template language this chart uses (Go text/template
// plus the Sprig/Helm functions below), so tests can render the chart without a Helm binary.
// It follows Helm where the chart depends on it: values read from YAML are float64 (printed by
// Go's %v, so 604800000 prints as 6.048e+08), int/int64/add/div give integers, maps range in
// sorted key order, a missing map key prints as nothing, and `required`/`fail` abort rendering.
// It is a test aid, not Helm: `helm lint` and `helm template` remain the checks to run where Helm
// exists (deploy/k8s/README.md).
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import YAML from "yaml";

/** A Go integer (int/int64), as opposed to a YAML number (float64). */
export class GoInt {
  constructor(readonly value: number) {}
}

/** Thrown by `required` and `fail`, and for template errors. */
export class RenderError extends Error {
  override name = "RenderError";
}

type Value = unknown;
type Node =
  | { kind: "text"; text: string }
  | { kind: "action"; pipe: Pipe; decl?: string[] }
  | { kind: "if"; branches: { cond: Pipe; body: Node[] }[]; otherwise: Node[] }
  | { kind: "range"; vars: string[]; pipe: Pipe; body: Node[]; otherwise: Node[] }
  | { kind: "with"; pipe: Pipe; body: Node[]; otherwise: Node[] };
type Operand =
  | { kind: "lit"; value: Value }
  | { kind: "field"; base: "dot" | string; path: string[] }
  | { kind: "ident"; name: string }
  | { kind: "paren"; pipe: Pipe };
type Pipe = Operand[][];

// ---------------------------------------------------------------------------------------------
// Lexing: text and actions, with {{- and -}} trimming.

interface Token {
  readonly text?: string;
  readonly action?: string;
}

function lex(source: string): Token[] {
  const tokens: Token[] = [];
  let at = 0;
  let trimNext = false;
  while (at < source.length) {
    const open = source.indexOf("{{", at);
    let text = source.slice(at, open === -1 ? source.length : open);
    if (trimNext) text = text.replace(/^\s+/, "");
    if (open === -1) {
      tokens.push({ text });
      break;
    }
    const trimLeft = source[open + 2] === "-" && /\s/.test(source[open + 3] ?? "");
    if (trimLeft) text = text.replace(/\s+$/, "");
    tokens.push({ text });
    const start = open + (trimLeft ? 3 : 2);
    const close = findClose(source, start);
    const trimRight = source[close - 1] === "-" && /\s/.test(source[close - 2] ?? "");
    tokens.push({ action: source.slice(start, trimRight ? close - 1 : close).trim() });
    trimNext = trimRight;
    at = close + 2;
  }
  return tokens;
}

function findClose(source: string, from: number): number {
  let quote: string | undefined;
  for (let i = from; i < source.length; i++) {
    const c = source[i]!;
    if (quote) {
      if (c === "\\" && quote === '"') i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "`") quote = c;
    else if (source.startsWith("/*", i)) i = source.indexOf("*/", i) + 1;
    else if (source.startsWith("}}", i)) return i;
  }
  throw new RenderError("unclosed action");
}

// ---------------------------------------------------------------------------------------------
// Parsing actions into pipelines, and token streams into trees.

function tokenizeAction(text: string): string[] {
  const out: string[] = [];
  const re = /\s*("(?:[^"\\]|\\.)*"|`[^`]*`|:=|[()|,=]|[^\s()|,=]+)/gy;
  let match: RegExpExecArray | null = re.exec(text);
  while (match !== null) {
    out.push(match[1]!);
    if (re.lastIndex >= text.length) break;
    match = re.exec(text);
  }
  return out;
}

function parsePipe(words: string[]): Pipe {
  let i = 0;
  const pipe: Pipe = [];
  const parseOperand = (): Operand => {
    const w = words[i++]!;
    if (w === "(") {
      const depthStart = i;
      let depth = 1;
      while (depth > 0) {
        if (words[i] === "(") depth++;
        else if (words[i] === ")") depth--;
        i++;
      }
      return { kind: "paren", pipe: parsePipe(words.slice(depthStart, i - 1)) };
    }
    if (w.startsWith('"')) return { kind: "lit", value: JSON.parse(w) };
    if (w.startsWith("`")) return { kind: "lit", value: w.slice(1, -1) };
    if (/^-?\d+(\.\d+)?$/.test(w)) return { kind: "lit", value: w.includes(".") ? Number(w) : new GoInt(Number(w)) };
    if (w === "true" || w === "false") return { kind: "lit", value: w === "true" };
    if (w === "nil") return { kind: "lit", value: null };
    if (w === ".") return { kind: "field", base: "dot", path: [] };
    if (w.startsWith(".")) return { kind: "field", base: "dot", path: w.slice(1).split(".") };
    if (w.startsWith("$")) {
      const [name, ...path] = w.split(".");
      return { kind: "field", base: name!, path };
    }
    return { kind: "ident", name: w };
  };
  let command: Operand[] = [];
  while (i < words.length) {
    if (words[i] === "|") {
      pipe.push(command);
      command = [];
      i++;
    } else command.push(parseOperand());
  }
  pipe.push(command);
  return pipe;
}

function parseTree(tokens: Token[], defines: Map<string, Node[]>): Node[] {
  let i = 0;
  const parseList = (stops: RegExp): { nodes: Node[]; stop: string } => {
    const nodes: Node[] = [];
    while (i < tokens.length) {
      const token = tokens[i++]!;
      if (token.text !== undefined) {
        if (token.text) nodes.push({ kind: "text", text: token.text });
        continue;
      }
      const action = token.action!;
      if (action.startsWith("/*")) continue;
      if (stops.test(action)) return { nodes, stop: action };
      const [keyword] = action.split(/\s+/, 1);
      const rest = action.slice(keyword!.length).trim();
      if (keyword === "if") nodes.push(parseIf(rest));
      else if (keyword === "range" || keyword === "with") {
        const { vars, pipe } = splitDecl(rest);
        const body = parseList(/^(else|end)\b/);
        const otherwise = body.stop.startsWith("else") ? parseList(/^end\b/).nodes : [];
        nodes.push(
          keyword === "range"
            ? { kind: "range", vars, pipe, body: body.nodes, otherwise }
            : { kind: "with", pipe, body: body.nodes, otherwise },
        );
      } else if (keyword === "define") {
        const name = JSON.parse(rest) as string;
        defines.set(name, parseList(/^end\b/).nodes);
      } else {
        const { vars, pipe } = splitDecl(action);
        nodes.push(vars.length > 0 ? { kind: "action", pipe, decl: vars } : { kind: "action", pipe });
      }
    }
    return { nodes, stop: "" };
  };
  const parseIf = (cond: string): Node => {
    const branches: { cond: Pipe; body: Node[] }[] = [];
    let current = cond;
    for (;;) {
      const body = parseList(/^(else|end)\b/);
      branches.push({ cond: parsePipe(tokenizeAction(current)), body: body.nodes });
      if (body.stop.startsWith("else if")) {
        current = body.stop.slice("else if".length).trim();
        continue;
      }
      const otherwise = body.stop.startsWith("else") ? parseList(/^end\b/).nodes : [];
      return { kind: "if", branches, otherwise };
    }
  };
  const splitDecl = (text: string): { vars: string[]; pipe: Pipe } => {
    const words = tokenizeAction(text);
    const assign = words.indexOf(":=");
    if (assign === -1) return { vars: [], pipe: parsePipe(words) };
    return { vars: words.slice(0, assign).filter((w) => w !== ","), pipe: parsePipe(words.slice(assign + 1)) };
  };
  const { nodes } = parseList(/^$/);
  return nodes;
}

// ---------------------------------------------------------------------------------------------
// Values: Go's printing and truthiness.

const isMap = (v: Value): v is Record<string, Value> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof GoInt);

/** Go's %v of a float64 (strconv 'g', shortest): exponent form below 1e-4 and from 1e6 up. */
function formatFloat(n: number): string {
  const exp = n === 0 ? 0 : Math.floor(Math.log10(Math.abs(n)));
  if (exp >= -4 && exp < 6) return String(n);
  const [mantissa, e] = n.toExponential().split("e");
  const sign = e!.startsWith("-") ? "-" : "+";
  return `${mantissa}e${sign}${e!.replace(/^[+-]/, "").padStart(2, "0")}`;
}

/** fmt.Sprint of one value, as a template prints it (Helm prints a missing value as nothing). */
export function goString(v: Value): string {
  if (v === null || v === undefined) return "";
  if (v instanceof GoInt) return String(v.value);
  if (typeof v === "number") return formatFloat(v);
  if (typeof v === "string") return v;
  if (typeof v === "boolean") return String(v);
  throw new RenderError(`cannot print ${JSON.stringify(v)}`);
}

function truthy(v: Value): boolean {
  if (v === null || v === undefined || v === false || v === "" || v === 0) return false;
  if (v instanceof GoInt) return v.value !== 0;
  if (Array.isArray(v)) return v.length > 0;
  if (isMap(v)) return Object.keys(v).length > 0;
  return true;
}

const toInt = (v: Value): number => {
  if (v instanceof GoInt) return v.value;
  if (typeof v === "number") return Math.trunc(v);
  if (typeof v === "string") return Number.parseInt(v, 10) || 0;
  if (typeof v === "boolean") return v ? 1 : 0;
  return 0;
};

function plain(v: Value): Value {
  if (v instanceof GoInt) return v.value;
  if (Array.isArray(v)) return v.map(plain);
  if (isMap(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

function sprintf(format: string, args: Value[]): string {
  let n = 0;
  return format.replace(/%([sdv%])/g, (_m, verb: string) => {
    if (verb === "%") return "%";
    const arg = args[n++];
    if (verb === "d") {
      if (!(arg instanceof GoInt)) throw new RenderError(`%d of a non-integer ${JSON.stringify(arg)}`);
      return String(arg.value);
    }
    return goString(arg);
  });
}

// ---------------------------------------------------------------------------------------------
// Evaluation.

interface Scope {
  readonly dot: Value;
  readonly vars: Map<string, Value>;
}

export class Renderer {
  readonly #defines = new Map<string, Node[]>();
  readonly #files = new Map<string, Node[]>();

  constructor(readonly chartDir: string) {
    const dir = join(chartDir, "templates");
    for (const file of readdirSync(dir).sort()) {
      const nodes = parseTree(lex(readFileSync(join(dir, file), "utf8")), this.#defines);
      // Helm names each file's template by its path, so `include (print .Template.BasePath "/x.yaml")` works.
      this.#defines.set(`unimatrix/templates/${file}`, nodes);
      this.#files.set(file, nodes);
    }
  }

  /** Renders every template with the given (already merged) values; file name -> text. */
  render(values: Record<string, Value>, release = { Name: "umx", Namespace: "unimatrix" }): Map<string, string> {
    const chart = YAML.parse(readFileSync(join(this.chartDir, "Chart.yaml"), "utf8")) as Record<string, string>;
    const out = new Map<string, string>();
    for (const [file, nodes] of this.#files) {
      if (file.startsWith("_")) continue;
      const root = {
        Values: values,
        Release: { ...release, Service: "Helm" },
        Chart: { Name: chart.name, Version: chart.version, AppVersion: chart.appVersion },
        Template: { BasePath: "unimatrix/templates", Name: `unimatrix/templates/${file}` },
      };
      out.set(file, this.#exec(nodes, { dot: root, vars: new Map([["$", root]]) }));
    }
    return out;
  }

  #exec(nodes: Node[], scope: Scope): string {
    let out = "";
    const vars = new Map(scope.vars);
    const local: Scope = { dot: scope.dot, vars };
    for (const node of nodes) {
      if (node.kind === "text") out += node.text;
      else if (node.kind === "action") {
        const value = this.#pipe(node.pipe, local);
        if (node.decl) vars.set(node.decl[0]!, value);
        else out += goString(value);
      } else if (node.kind === "if") {
        const branch = node.branches.find((b) => truthy(this.#pipe(b.cond, local)));
        out += this.#exec(branch ? branch.body : node.otherwise, local);
      } else if (node.kind === "with") {
        const value = this.#pipe(node.pipe, local);
        out += truthy(value) ? this.#exec(node.body, { dot: value, vars }) : this.#exec(node.otherwise, local);
      } else {
        const value = this.#pipe(node.pipe, local);
        const entries: [Value, Value][] = Array.isArray(value)
          ? value.map((v, i) => [new GoInt(i), v])
          : isMap(value)
            ? Object.keys(value)
                .sort()
                .map((k) => [k, value[k]])
            : [];
        if (entries.length === 0) out += this.#exec(node.otherwise, local);
        for (const [key, item] of entries) {
          const inner = new Map(vars);
          if (node.vars.length === 1) inner.set(node.vars[0]!, item);
          if (node.vars.length === 2) {
            inner.set(node.vars[0]!, key);
            inner.set(node.vars[1]!, item);
          }
          out += this.#exec(node.body, { dot: item, vars: inner });
        }
      }
    }
    return out;
  }

  #pipe(pipe: Pipe, scope: Scope): Value {
    let piped: Value | undefined;
    let first = true;
    for (const command of pipe) {
      piped = this.#command(command, scope, first ? undefined : { value: piped });
      first = false;
    }
    return piped;
  }

  #command(command: Operand[], scope: Scope, piped?: { value: Value }): Value {
    const [head, ...rest] = command;
    if (head?.kind === "ident") {
      const args = rest.map((operand) => this.#operand(operand, scope));
      if (piped) args.push(piped.value);
      return this.#call(head.name, args, scope);
    }
    if (command.length !== 1 || piped) throw new RenderError("cannot call a non-function");
    return this.#operand(head!, scope);
  }

  #operand(operand: Operand, scope: Scope): Value {
    switch (operand.kind) {
      case "lit":
        return operand.value;
      case "paren":
        return this.#pipe(operand.pipe, scope);
      case "ident":
        return this.#call(operand.name, [], scope);
      case "field": {
        let value: Value;
        if (operand.base === "dot") value = scope.dot;
        else if (scope.vars.has(operand.base)) value = scope.vars.get(operand.base);
        else throw new RenderError(`undefined variable ${operand.base}`);
        for (const key of operand.path) {
          if (value === null || value === undefined) throw new RenderError(`nil pointer evaluating .${key}`);
          if (!isMap(value)) throw new RenderError(`can't evaluate field ${key} in ${typeof value}`);
          value = value[key];
        }
        return value;
      }
    }
  }

  #call(name: string, args: Value[], scope: Scope): Value {
    const s = (v: Value) => goString(v);
    switch (name) {
      case "include": {
        const body = this.#defines.get(args[0] as string);
        if (!body) throw new RenderError(`no template ${JSON.stringify(args[0])}`);
        return this.#exec(body, { dot: args[1], vars: new Map([["$", args[1]]]) });
      }
      case "dict": {
        const out: Record<string, Value> = {};
        for (let i = 0; i < args.length; i += 2) out[args[i] as string] = args[i + 1];
        return out;
      }
      case "list":
        return args;
      case "index":
        return args
          .slice(1)
          .reduce((v: Value, k) => (isMap(v) ? v[k as string] : Array.isArray(v) ? v[toInt(k)] : undefined), args[0]);
      case "printf":
        return sprintf(args[0] as string, args.slice(1));
      case "print":
        return args.map(s).join("");
      case "quote":
        return args
          .filter((a) => a !== null && a !== undefined)
          .map((a) => JSON.stringify(s(a)))
          .join(" ");
      case "toString":
        return s(args[0]);
      case "toYaml":
        return YAML.stringify(plain(args[0]), { sortMapEntries: true }).replace(/\n$/, "");
      case "nindent":
      case "indent": {
        const pad = " ".repeat(toInt(args[0]));
        const text = pad + s(args[1]).replaceAll("\n", `\n${pad}`);
        return name === "nindent" ? `\n${text}` : text;
      }
      case "default":
        return truthy(args[1]) ? args[1] : args[0];
      case "trunc":
        return s(args[1]).slice(0, toInt(args[0]));
      case "trimSuffix":
        return s(args[1]).endsWith(s(args[0])) ? s(args[1]).slice(0, -s(args[0]).length || undefined) : s(args[1]);
      case "contains":
        return s(args[1]).includes(s(args[0]));
      case "replace":
        return s(args[2]).replaceAll(s(args[0]), s(args[1]));
      case "required":
        if (args[1] === null || args[1] === undefined || args[1] === "") throw new RenderError(s(args[0]));
        return args[1];
      case "fail":
        throw new RenderError(s(args[0]));
      case "int":
      case "int64":
        return new GoInt(toInt(args[0]));
      case "add":
        return new GoInt(args.reduce((sum: number, v) => sum + toInt(v), 0));
      case "div":
        return new GoInt(Math.trunc(toInt(args[0]) / toInt(args[1])));
      case "gt":
        return toInt(args[0]) > toInt(args[1]);
      case "eq":
        return args.slice(1).some((v) => plain(v) === plain(args[0]));
      case "ne":
        return plain(args[0]) !== plain(args[1]);
      case "not":
        return !truthy(args[0]);
      case "or":
        return args.find(truthy) ?? args[args.length - 1];
      case "and":
        return args.find((a) => !truthy(a)) ?? args[args.length - 1];
      case "kindIs": {
        const v = args[1];
        const kind =
          v instanceof GoInt
            ? "int64"
            : typeof v === "number"
              ? "float64"
              : typeof v === "string"
                ? "string"
                : typeof v === "boolean"
                  ? "bool"
                  : Array.isArray(v)
                    ? "slice"
                    : isMap(v)
                      ? "map"
                      : "invalid";
        return kind === args[0];
      }
      case "sha256sum":
        return createHash("sha256").update(s(args[0])).digest("hex");
      default:
        throw new RenderError(`function ${name} is not supported by the test renderer (scope: ${typeof scope.dot})`);
    }
  }
}
