// Writes proto/buf/validate/validate.proto from the descriptor that @bufbuild/protovalidate
// embeds (the npm package ships generated code, not the .proto; no other source is reachable).
// Run by hand after upgrading the package: `node scripts/vendor-protovalidate.mjs`.
// A unit test (packages/service-kit/test/validate-vendored.unit.test.ts) checks that the
// vendored file compiles to exactly the package's descriptor.
//
// Hand-written because no npm tool prints a FileDescriptorProto back to .proto source with
// aggregate (message-valued) custom options, which validate.proto uses throughout.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { getExtension, hasExtension, isFieldSet, ScalarType } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import {
  FieldDescriptorProtoSchema,
  FieldOptionsSchema,
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
} from "@bufbuild/protobuf/wkt";
import * as pv from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { version } = JSON.parse(
  readFileSync(join(root, "node_modules", "@bufbuild", "protovalidate", "package.json"), "utf8"),
);
const file = pv.file_buf_validate_validate;
const proto = file.proto;

const TYPE_NAMES = {
  [Type.DOUBLE]: "double",
  [Type.FLOAT]: "float",
  [Type.INT64]: "int64",
  [Type.UINT64]: "uint64",
  [Type.INT32]: "int32",
  [Type.FIXED64]: "fixed64",
  [Type.FIXED32]: "fixed32",
  [Type.BOOL]: "bool",
  [Type.STRING]: "string",
  [Type.BYTES]: "bytes",
  [Type.UINT32]: "uint32",
  [Type.SFIXED32]: "sfixed32",
  [Type.SFIXED64]: "sfixed64",
  [Type.SINT32]: "sint32",
  [Type.SINT64]: "sint64",
};

/** A proto string literal (UTF-8 kept, quotes, backslashes and control characters escaped). */
function quote(text) {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (code < 0x20 || code === 0x7f) out += `\\${code.toString(8).padStart(3, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}

function scalarText(field, value) {
  if (field.fieldKind === "enum" || field.enum) {
    return field.enum.values.find((v) => v.number === value)?.name ?? String(value);
  }
  if (field.scalar === ScalarType.STRING) return quote(value);
  if (field.scalar === ScalarType.BYTES) return quote(Buffer.from(value).toString("latin1"));
  return String(value);
}

/** A message value in protobuf text format (the body between braces), one field per line. */
function textBody(schema, message, indent) {
  const r = reflect(schema, message);
  const lines = [];
  for (const field of r.fields) {
    if (!r.isSet(field)) continue;
    const value = r.get(field);
    const items = field.fieldKind === "list" ? [...value] : [value];
    for (const item of items) {
      const isMessage = field.fieldKind === "message" || (field.fieldKind === "list" && field.listKind === "message");
      if (isMessage) {
        const inner = textBody(field.message, item.message, `${indent}  `);
        lines.push(`${indent}${field.name}: {\n${inner}\n${indent}}`);
      } else {
        lines.push(`${indent}${field.name}: ${scalarText(field, item)}`);
      }
    }
  }
  return lines.join("\n");
}

const fieldExtensions = [pv.field, pv.predefined];

/** `[a = b, ...]` for a field's options: standard ones and the buf.validate extensions. */
function fieldOptions(field, indent) {
  const parts = [];
  if (isFieldSet(field, FieldDescriptorProtoSchema.field.defaultValue)) {
    const literal =
      field.type === Type.STRING
        ? quote(field.defaultValue)
        : field.type === Type.BYTES
          ? quote(field.defaultValue)
          : field.defaultValue;
    parts.push(`default = ${literal}`);
  }
  if (isFieldSet(field, FieldDescriptorProtoSchema.field.jsonName) && field.jsonName !== camel(field.name))
    parts.push(`json_name = ${quote(field.jsonName)}`);
  const options = field.options;
  if (options) {
    const r = reflect(FieldOptionsSchema, options);
    for (const f of r.fields) {
      if (!r.isSet(f)) continue;
      const value = r.get(f);
      if (f.fieldKind === "list") for (const v of value) parts.push(`${f.name} = ${scalarText(f, v)}`);
      else if (f.fieldKind === "message") throw new Error(`unsupported message option ${f.name}`);
      else parts.push(`${f.name} = ${scalarText(f, value)}`);
    }
    for (const ext of fieldExtensions) {
      if (!hasExtension(options, ext)) continue;
      const body = textBody(ext.message, getExtension(options, ext), `${indent}    `);
      parts.push(`(${ext.typeName}) = {\n${body}\n${indent}  }`);
    }
  }
  if (parts.length === 0) return "";
  if (parts.every((p) => !p.includes("\n"))) return ` [${parts.join(", ")}]`;
  return ` [\n${indent}  ${parts.join(`,\n${indent}  `)}\n${indent}]`;
}

function camel(name) {
  return name.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
}

function typeOf(field) {
  if (field.type === Type.MESSAGE || field.type === Type.ENUM) return field.typeName;
  return TYPE_NAMES[field.type];
}

function label(field) {
  if (field.label === Label.REPEATED) return "repeated ";
  if (field.label === Label.REQUIRED) return "required ";
  return "optional ";
}

function fieldLine(field, indent, inOneof) {
  const head = `${inOneof ? "" : label(field)}${typeOf(field)} ${field.name} = ${field.number}`;
  return `${indent}${head}${fieldOptions(field, indent)};`;
}

function rangeText(range, exclusiveEnd) {
  const end = exclusiveEnd ? range.end - 1 : range.end;
  if (end === 536870911) return `${range.start} to max`;
  return end === range.start ? `${range.start}` : `${range.start} to ${end}`;
}

function printEnum(e, indent) {
  const lines = [`${indent}enum ${e.name} {`];
  for (const v of e.value) lines.push(`${indent}  ${v.name} = ${v.number};`);
  for (const r of e.reservedRange) lines.push(`${indent}  reserved ${rangeText(r, false)};`);
  if (e.reservedName.length) lines.push(`${indent}  reserved ${e.reservedName.map(quote).join(", ")};`);
  lines.push(`${indent}}`);
  return lines.join("\n");
}

function printMessage(m, indent) {
  if (m.options && Object.keys(m.options).some((k) => k !== "$typeName" && m.options[k] !== undefined))
    throw new Error(`unsupported options on message ${m.name}`);
  const lines = [`${indent}message ${m.name} {`];
  const inner = `${indent}  `;
  let open = -1;
  for (const field of m.field) {
    const oneof = isFieldSet(field, FieldDescriptorProtoSchema.field.oneofIndex) ? field.oneofIndex : undefined;
    if (open !== -1 && oneof !== open) {
      lines.push(`${inner}}`);
      open = -1;
    }
    if (oneof !== undefined && oneof !== open) {
      const decl = m.oneofDecl[oneof];
      lines.push(`${inner}oneof ${decl.name} {`);
      open = oneof;
    }
    lines.push(fieldLine(field, open === -1 ? inner : `${inner}  `, open !== -1));
  }
  if (open !== -1) lines.push(`${inner}}`);
  for (const nested of m.nestedType) lines.push(printMessage(nested, inner));
  for (const e of m.enumType) lines.push(printEnum(e, inner));
  for (const r of m.extensionRange) lines.push(`${inner}extensions ${rangeText(r, true)};`);
  for (const r of m.reservedRange) lines.push(`${inner}reserved ${rangeText(r, true)};`);
  if (m.reservedName.length) lines.push(`${inner}reserved ${m.reservedName.map(quote).join(", ")};`);
  lines.push(`${indent}}`);
  return lines.join("\n");
}

const out = [
  `// Vendored from @bufbuild/protovalidate@${version} (Apache-2.0, Copyright Buf Technologies, Inc.):`,
  "// printed from the descriptor the package embeds by scripts/vendor-protovalidate.mjs.",
  "// Generated; do not edit. Comments of the upstream file are not in the descriptor.",
  'syntax = "proto2";',
  "",
  `package ${proto.package};`,
  "",
  ...proto.dependency.map((d) => `import ${quote(d)};`),
  "",
];
const fo = proto.options;
if (fo.javaPackage) out.push(`option java_package = ${quote(fo.javaPackage)};`);
if (fo.javaOuterClassname) out.push(`option java_outer_classname = ${quote(fo.javaOuterClassname)};`);
if (fo.javaMultipleFiles) out.push("option java_multiple_files = true;");
if (fo.goPackage) out.push(`option go_package = ${quote(fo.goPackage)};`);
out.push("");
const byExtendee = new Map();
for (const ext of proto.extension) byExtendee.set(ext.extendee, [...(byExtendee.get(ext.extendee) ?? []), ext]);
for (const [extendee, exts] of byExtendee) {
  out.push(`extend ${extendee} {`, ...exts.map((e) => fieldLine(e, "  ", false)), "}", "");
}
for (const m of proto.messageType) out.push(printMessage(m, ""), "");
for (const e of proto.enumType) out.push(printEnum(e, ""), "");

const target = join(root, "proto", "buf", "validate", "validate.proto");
writeFileSync(target, `${out.join("\n").trimEnd()}\n`);
console.log(`wrote ${target}`);
