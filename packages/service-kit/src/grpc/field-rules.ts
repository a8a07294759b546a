import { type DescField, type DescMessage, getOption, hasOption, isFieldSet } from "@bufbuild/protobuf";
import {
  field as fieldRulesOption,
  RepeatedRulesSchema,
  type StringRules,
  StringRulesSchema,
} from "@unimatrix/contracts/buf/validate/validate_pb";

/** The limits of one string field as the contract's `buf.validate` rules write them. */
export interface StringLimits {
  /** Non-empty is required. */
  readonly required: boolean;
  readonly minLen?: number;
  /** Most characters (code points). */
  readonly maxLen?: number;
  readonly minBytes?: number;
  /** Most UTF-8 bytes. */
  readonly maxBytes?: number;
  /** An RE2 pattern the value must match (the contracts use the ECMAScript-compatible subset). */
  readonly pattern?: string;
}

/** The limits of one integer field (`gte`/`lte` of its rules). */
export interface NumberLimits {
  readonly min?: number;
  readonly max?: number;
}

function fieldOf(schema: DescMessage, name: string): DescField {
  const field = schema.fields.find((f) => f.name === name);
  if (!field) throw new Error(`${schema.typeName} has no field ${name}`);
  return field;
}

function rulesOf(field: DescField) {
  return hasOption(field, fieldRulesOption) ? getOption(field, fieldRulesOption) : undefined;
}

/** The string rules of `schema.name` (a string field or a repeated string's items). */
export function stringLimits(schema: DescMessage, name: string): StringLimits {
  const rules = rulesOf(fieldOf(schema, name));
  const own = rules?.type.case === "string" ? rules.type.value : undefined;
  const items =
    rules?.type.case === "repeated" && rules.type.value.items?.type.case === "string"
      ? rules.type.value.items.type.value
      : undefined;
  const s = own ?? items;
  const set = (key: "minLen" | "maxLen" | "minBytes" | "maxBytes") =>
    s && isFieldSet(s, StringRulesSchema.field[key]) ? Number((s as StringRules)[key]) : undefined;
  return {
    required: rules?.required ?? false,
    minLen: set("minLen"),
    maxLen: set("maxLen"),
    minBytes: set("minBytes"),
    maxBytes: set("maxBytes"),
    pattern: s?.pattern || undefined,
  };
}

/** The `max_items` of a repeated field's rules. */
export function maxItems(schema: DescMessage, name: string): number | undefined {
  const rules = rulesOf(fieldOf(schema, name));
  return rules?.type.case === "repeated" && isFieldSet(rules.type.value, RepeatedRulesSchema.field.maxItems)
    ? Number(rules.type.value.maxItems)
    : undefined;
}

/** The range of an integer field's rules (int32/uint32/int64/uint64 `gte` and `lte`). */
export function numberLimits(schema: DescMessage, name: string): NumberLimits {
  const rules = rulesOf(fieldOf(schema, name));
  const t = rules?.type;
  if (!t || !["int32", "uint32", "int64", "uint64"].includes(t.case ?? "")) return {};
  const value = t.value as {
    greaterThan?: { case?: string; value?: unknown };
    lessThan?: { case?: string; value?: unknown };
  };
  const bound = (b: { case?: string; value?: unknown } | undefined, inclusive: string) =>
    b?.case === inclusive ? Number(b.value) : undefined;
  return { min: bound(value.greaterThan, "gte"), max: bound(value.lessThan, "lte") };
}
