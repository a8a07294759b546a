import { randomUUID } from "node:crypto";
import { create, type DescField, type DescMessage, getOption, hasOption, type MessageShape } from "@bufbuild/protobuf";
import { field as fieldRules, oneof as oneofRules } from "@unimatrix/contracts/buf/validate/validate_pb";

const UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";

/** A value for a string field that its rules accept. `ids` supplies values for id fields by name. */
function stringFor(field: DescField, ids: Record<string, string>): string | undefined {
  if (ids[field.name] !== undefined) return ids[field.name];
  const rules = hasOption(field, fieldRules) ? getOption(field, fieldRules) : undefined;
  const s = rules?.type.case === "string" ? rules.type.value : undefined;
  if (s?.pattern === UUID_PATTERN) return rules?.required ? randomUUID() : undefined;
  if (s?.pattern === "^[A-Za-z0-9._:-]{1,128}$") return `s-${randomUUID()}`;
  if (s?.pattern === "^[A-Za-z0-9+/=_-]{1,128}$") return randomUUID().replaceAll("-", "");
  if (rules?.required || (s && s.minLen > 0n) || (s && s.minBytes > 0n)) return "x";
  return undefined;
}

/**
 * A request of `schema` that passes its contract rules: required strings filled (UUIDs random
 * unless given in `ids` by field name), enums at their first defined non-zero value when zero is
 * refused, numbers at their lower bound, required oneofs set to their first member.
 */
export function validRequest<D extends DescMessage>(schema: D, ids: Record<string, string> = {}): MessageShape<D> {
  const init: Record<string, unknown> = {};
  for (const member of schema.members) {
    if (member.kind === "oneof") {
      const first = member.fields[0];
      const required = hasOption(member, oneofRules) && getOption(member, oneofRules).required;
      if (first && required) {
        const value =
          first.fieldKind === "message" ? create(first.message, {}) : first.fieldKind === "scalar" ? randomUUID() : 1;
        init[member.localName] = { case: first.localName, value };
      }
      continue;
    }
    const field = member;
    const rules = hasOption(field, fieldRules) ? getOption(field, fieldRules) : undefined;
    if (field.fieldKind === "scalar" && field.scalar === 9) {
      const value = stringFor(field, ids);
      if (value !== undefined) init[field.localName] = value;
    } else if (field.fieldKind === "enum" && rules?.type.case === "enum" && rules.type.value.notIn.includes(0)) {
      init[field.localName] = field.enum.values.find((v) => v.number !== 0)?.number;
    } else if (field.fieldKind === "scalar" && rules?.type.case && "greaterThan" in rules.type.value) {
      const bound = (rules.type.value as { greaterThan: { case?: string; value?: number | bigint } }).greaterThan;
      if (bound.case === "gte" && bound.value !== undefined) init[field.localName] = bound.value;
    }
  }
  return create(schema, init as never);
}
