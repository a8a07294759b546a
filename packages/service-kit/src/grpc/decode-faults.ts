import {
  type DescField,
  type DescMessage,
  fromBinary,
  fromJson,
  type JsonObject,
  type JsonValue,
  ScalarType,
} from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/**
 * Why a request body does not decode, naming the field (DESIGN §10: every INVALID_ARGUMENT names
 * its field). protobuf-es says only "premature EOF" or "invalid UTF-8" for binary and names the
 * message type, not the field, for a bad JSON timestamp; these walk the body field by field to
 * find the one that fails. Used by the kit's gRPC deserializer and by the gateway's decode guard.
 */
export interface DecodeFault {
  /** The snake_case field path (`start_time`, `heartbeat.at`), or `request` when no field is at fault. */
  readonly field: string;
  readonly reason: string;
}

const join = (prefix: string, name: string) => (prefix ? `${prefix}.${name}` : name);

function scalarWireType(scalar: ScalarType): WireType {
  switch (scalar) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return WireType.LengthDelimited;
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WireType.Bit64;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return WireType.Bit32;
    default:
      return WireType.Varint;
  }
}

/** The wire types a field may arrive in (repeated scalars and enums packed or not). */
function wireTypesOf(field: DescField): WireType[] {
  switch (field.fieldKind) {
    case "scalar":
      return [scalarWireType(field.scalar)];
    case "enum":
      return [WireType.Varint];
    case "message":
      return field.delimitedEncoding ? [WireType.StartGroup] : [WireType.LengthDelimited];
    case "map":
      return [WireType.LengthDelimited];
    case "list":
      if (field.listKind === "message")
        return field.delimitedEncoding ? [WireType.StartGroup] : [WireType.LengthDelimited];
      if (field.listKind === "enum") return [WireType.Varint, WireType.LengthDelimited];
      return field.scalar === ScalarType.STRING || field.scalar === ScalarType.BYTES
        ? [WireType.LengthDelimited]
        : [scalarWireType(field.scalar), WireType.LengthDelimited];
  }
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The failure of decoding `bytes` as `schema`, or null when they decode. */
function failure(schema: DescMessage, bytes: Uint8Array): string | null {
  try {
    fromBinary(schema, bytes);
    return null;
  } catch (error) {
    return messageOf(error);
  }
}

/**
 * The first field of a binary `schema` message that does not decode, or null when all of it does.
 * Nested messages are walked so the path ends at the innermost field at fault.
 */
export function binaryFault(schema: DescMessage, bytes: Uint8Array, prefix = ""): DecodeFault | null {
  const whole = failure(schema, bytes);
  if (whole === null) return null;
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const start = reader.pos;
    let number: number;
    let wireType: WireType;
    try {
      [number, wireType] = reader.tag();
    } catch (error) {
      return { field: prefix || "request", reason: `malformed field tag at byte ${start} (${messageOf(error)})` };
    }
    const field = schema.fields.find((f) => f.number === number);
    const name = field ? join(prefix, field.name) : prefix || "request";
    const what = field ? "" : `field number ${number}: `;
    if (field && !wireTypesOf(field).includes(wireType)) {
      return { field: name, reason: `wrong wire type ${wireType} for a ${field.fieldKind} field` };
    }
    let payload: Uint8Array;
    try {
      payload = reader.skip(wireType, number);
    } catch (error) {
      return { field: name, reason: `${what}truncated value (${messageOf(error)})` };
    }
    if (!field) continue;
    const one = failure(schema, bytes.subarray(start, reader.pos));
    if (one === null) continue;
    const nested = field.fieldKind === "message" || (field.fieldKind === "list" && field.listKind === "message");
    if (nested && wireType === WireType.LengthDelimited) {
      const inner = new BinaryReader(payload).bytes();
      const deeper = binaryFault(field.message!, inner, name);
      if (deeper) return deeper;
    }
    return { field: name, reason: one === "premature EOF" ? "truncated value" : one };
  }
  return { field: prefix || "request", reason: whole };
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function jsonFailure(schema: DescMessage, json: JsonValue): string | null {
  try {
    fromJson(schema, json, { ignoreUnknownFields: false });
    return null;
  } catch (error) {
    return messageOf(error);
  }
}

/**
 * The first member of a JSON `schema` message that does not decode, or null when all of it does:
 * each member is decoded alone, and objects of message fields (other than the well-known types,
 * whose JSON is not an object of fields) are walked.
 */
function jsonFault(schema: DescMessage, json: JsonValue, prefix = ""): DecodeFault | null {
  const whole = jsonFailure(schema, json);
  if (whole === null) return null;
  if (!isObject(json)) return { field: prefix || "request", reason: whole };
  for (const [key, value] of Object.entries(json)) {
    const field = schema.fields.find((f) => f.jsonName === key || f.name === key);
    if (!field) {
      const named = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(key) ? join(prefix, key) : prefix || "request";
      return { field: named, reason: `is not a field of ${schema.typeName}` };
    }
    const one = jsonFailure(schema, { [key]: value });
    if (one === null) continue;
    const name = join(prefix, field.name);
    if (field.fieldKind === "message" && isObject(value) && !field.message.typeName.startsWith("google.protobuf.")) {
      const deeper = jsonFault(field.message, value, name);
      if (deeper) return deeper;
    }
    return { field: name, reason: one.replace(/^cannot decode field [\w.]+ from JSON: /, "") };
  }
  // Every member decodes alone: what is left is a oneof set by more than one of its members.
  for (const oneof of schema.oneofs) {
    const set = oneof.fields.filter((f) => (json[f.jsonName] ?? json[f.name] ?? null) !== null);
    if (set.length > 1) {
      return { field: join(prefix, oneof.name), reason: `is set by both ${set.map((f) => f.name).join(" and ")}` };
    }
  }
  return { field: prefix || "request", reason: whole };
}

/** A JSON body's fault (text that is not JSON is the request's). */
export function jsonTextFault(schema: DescMessage, text: string): DecodeFault | null {
  let json: JsonValue;
  try {
    json = JSON.parse(text) as JsonValue;
  } catch (error) {
    return { field: "request", reason: `is not JSON (${messageOf(error)})` };
  }
  return jsonFault(schema, json);
}
