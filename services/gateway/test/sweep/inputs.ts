import {
  clone,
  type DescField,
  type DescMessage,
  type DescMethod,
  getOption,
  hasOption,
  type JsonObject,
  toBinary,
  toJson,
} from "@bufbuild/protobuf";
import { field as fieldRules, oneof as oneofRules } from "@unimatrix/contracts/buf/validate/validate_pb";
import { validRequest } from "@unimatrix/service-kit/testing";

/** The classes of bad input the sweep sends. */
export const CLASSES = [
  "empty",
  "wrong-json-type",
  "unknown-enum",
  "non-canonical-id",
  "nul-control-utf8",
  "oversize",
  "bad-number",
  "foreign-page-token",
  "undecodable",
] as const;
/** One class of bad input. */
export type BadClass = (typeof CLASSES)[number];

/** One bad request: as Connect JSON text and/or protobuf bytes (for Connect binary and gRPC). */
export interface BadInput {
  readonly class: BadClass;
  /** What is wrong, for failure messages (e.g. `cube_id ← upper case`). */
  readonly what: string;
  readonly json?: string;
  readonly binary?: Uint8Array;
}

const UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";

function rulesOf(field: DescField) {
  return hasOption(field, fieldRules) ? getOption(field, fieldRules) : undefined;
}

function stringRules(field: DescField) {
  const rules = rulesOf(field);
  return rules?.type.case === "string" ? rules.type.value : undefined;
}

/** Field number + wire type 2 + length + bytes: a length-delimited field with raw bytes. */
function rawField(number: number, bytes: Uint8Array): Uint8Array {
  const varint = (n: number) => {
    const out: number[] = [];
    while (n > 0x7f) {
      out.push((n & 0x7f) | 0x80);
      n >>>= 7;
    }
    out.push(n);
    return out;
  };
  return Uint8Array.from([...varint((number << 3) | 2), ...varint(bytes.length), ...bytes]);
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function requiredSomewhere(schema: DescMessage): boolean {
  return (
    schema.fields.some((f) => rulesOf(f)?.required) ||
    schema.oneofs.some((o) => hasOption(o, oneofRules) && getOption(o, oneofRules).required)
  );
}

/**
 * Every bad input for one method, derived from its request's fields and their contract rules
 * (no per-RPC list): each input breaks exactly one rule of an otherwise valid request.
 */
export function badInputs(method: DescMethod, ids: Record<string, string> = {}): BadInput[] {
  const schema = method.input;
  const base = validRequest(schema, ids);
  const baseJson = toJson(schema, base) as JsonObject;
  const baseBinary = toBinary(schema, base);
  const out: BadInput[] = [];
  const withJson = (cls: BadClass, what: string, patch: JsonObject, binaryToo = true) => {
    const json = { ...baseJson, ...patch };
    let binary: Uint8Array | undefined;
    if (binaryToo) {
      try {
        binary = toBinary(schema, patched(schema, base, patch));
      } catch {
        binary = undefined;
      }
    }
    out.push({ class: cls, what, json: JSON.stringify(json), ...(binary ? { binary } : {}) });
  };

  if (requiredSomewhere(schema)) out.push({ class: "empty", what: "{}", json: "{}", binary: new Uint8Array(0) });
  out.push({ class: "undecodable", what: "bytes 0a ff", binary: Uint8Array.of(0x0a, 0xff) });
  out.push({ class: "wrong-json-type", what: "a JSON array as the body", json: "[]" });

  for (const field of schema.fields) {
    const name = field.jsonName;
    const s = stringRules(field);
    if (field.fieldKind === "scalar" && field.scalar === 9) {
      out.push({
        class: "wrong-json-type",
        what: `${field.name} ← {}`,
        json: JSON.stringify({ ...baseJson, [name]: {} }),
      });
      if (s?.pattern === UUID_PATTERN) {
        const id = (baseJson[name] as string | undefined) ?? "0e8b1f62-7a4b-4c9e-9a3e-4b2f1c0d9e8a";
        withJson("non-canonical-id", `${field.name} ← upper case`, { [name]: id.toUpperCase() });
      }
      if (s?.pattern) {
        withJson("nul-control-utf8", `${field.name} ← NUL`, { [name]: "a\u0000b" });
        withJson("nul-control-utf8", `${field.name} ← BEL`, { [name]: "a\u0007b" });
        out.push({
          class: "nul-control-utf8",
          what: `${field.name} ← invalid UTF-8`,
          binary: concat(baseBinary, rawField(field.number, Uint8Array.of(0x61, 0xff, 0xfe))),
        });
      }
      const max = s && (s.maxLen > 0n ? Number(s.maxLen) : s.maxBytes > 0n ? Number(s.maxBytes) : 0);
      if (max) withJson("oversize", `${field.name} ← ${max + 1} characters`, { [name]: "x".repeat(max + 1) });
      if (s && s.maxBytes > 0n && s.maxLen === 0n) {
        const chars = Math.floor(Number(s.maxBytes) / 2) + 1;
        withJson("oversize", `${field.name} ← ${chars} two-byte characters`, { [name]: "é".repeat(chars) });
      }
      if (field.name === "page_token" || field.name === "cursor" || field.name === "after") {
        const foreign = Buffer.from(JSON.stringify({ o: 1, s: "someone else's list" })).toString("base64url");
        withJson("foreign-page-token", `${field.name} ← a token from another list`, { [name]: foreign });
      }
    } else if (field.fieldKind === "enum") {
      withJson("unknown-enum", `${field.name} ← "X_BOGUS"`, { [name]: "X_BOGUS" }, false);
      withJson("unknown-enum", `${field.name} ← 99`, { [name]: 99 });
      out.push({
        class: "wrong-json-type",
        what: `${field.name} ← []`,
        json: JSON.stringify({ ...baseJson, [name]: [] }),
      });
    } else if (field.fieldKind === "list" && field.listKind === "enum") {
      withJson("unknown-enum", `${field.name} ← ["X_BOGUS"]`, { [name]: ["X_BOGUS"] }, false);
      withJson("unknown-enum", `${field.name} ← [99]`, { [name]: [99] });
    } else if (field.fieldKind === "list" && field.listKind === "scalar") {
      out.push({
        class: "wrong-json-type",
        what: `${field.name} ← "x"`,
        json: JSON.stringify({ ...baseJson, [name]: "x" }),
      });
      const items = rulesOf(field)?.type;
      if (items?.case === "repeated" && items.value.maxItems > 0n) {
        const n = Number(items.value.maxItems) + 1;
        const ids = Array.from({ length: n }, (_, i) => `0e8b1f62-7a4b-4c9e-9a3e-${String(i).padStart(12, "0")}`);
        withJson("oversize", `${field.name} ← ${n} items`, { [name]: ids });
      }
      withJson("non-canonical-id", `${field.name} ← [upper case]`, {
        [name]: ["0E8B1F62-7A4B-4C9E-9A3E-4B2F1C0D9E8A"],
      });
    } else if (field.fieldKind === "scalar") {
      const rules = rulesOf(field)?.type;
      const ranged = rules?.value !== undefined && "greaterThan" in rules.value;
      out.push({
        class: "wrong-json-type",
        what: `${field.name} ← "abc"`,
        json: JSON.stringify({ ...baseJson, [name]: "abc" }),
      });
      if (ranged) {
        withJson("bad-number", `${field.name} ← -1`, { [name]: -1 });
        withJson("bad-number", `${field.name} ← NaN`, { [name]: "NaN" }, false);
        withJson("bad-number", `${field.name} ← 1e30`, { [name]: 1e30 }, false);
        const lte = (rules!.value as { lessThan?: { case?: string; value?: unknown } }).lessThan;
        if (lte?.case === "lte") withJson("bad-number", `${field.name} ← lte + 1`, { [name]: Number(lte.value) + 1 });
        const gte = (rules!.value as { greaterThan?: { case?: string; value?: unknown } }).greaterThan;
        if (gte?.case === "gte" && Number(gte.value) > 0) withJson("bad-number", `${field.name} ← 0`, { [name]: 0 });
      }
    }
  }
  return out;
}

/** A copy of `base` with the patched fields (by JSON name) set as given; throws when not representable. */
function patched(schema: DescMessage, base: object, patch: JsonObject): never {
  const message = clone(schema, base as never) as unknown as Record<string, unknown>;
  for (const [key, value] of Object.entries(patch)) {
    const field = schema.fields.find((f) => f.jsonName === key);
    if (!field) throw new Error(`no field ${key}`);
    let v: unknown = value;
    if (field.fieldKind === "scalar" && (field.scalar === 3 || field.scalar === 4)) v = BigInt(value as number);
    if (field.fieldKind === "scalar" && (field.scalar === 13 || field.scalar === 4) && Number(value) < 0)
      throw new Error("unsigned fields cannot carry a negative number in binary");
    if (field.oneof) message[field.oneof.localName] = { case: field.localName, value: v };
    else message[field.localName] = v;
  }
  return message as never;
}
