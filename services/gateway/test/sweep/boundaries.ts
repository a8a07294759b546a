import {
  type DescField,
  type DescMessage,
  type DescMethod,
  type JsonObject,
  toBinary,
  toJson,
} from "@bufbuild/protobuf";
import { validRequest } from "@unimatrix/service-kit/testing";

/** The boundary values every numeric field gets: 0, −1, 2^31, 2^53, 2^63−1, 2^63, 2^64−1. */
export const BOUNDARIES: readonly bigint[] = [0n, -1n, 2n ** 31n, 2n ** 53n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n - 1n];

/** One numeric field of a request, reached through message fields: `["since_time", "seconds"]`. */
export interface NumericPath {
  /** The fields from the request down to the number. */
  readonly fields: readonly DescField[];
  /** `since_time.seconds`. */
  readonly name: string;
}

/** The varint-encoded scalar types (protobuf-es `ScalarType`): int64, uint64, int32, uint32, sint32, sint64. */
const VARINT_SCALARS = new Set([3, 4, 5, 13, 17, 18]);
/** The 64-bit ones, written as JSON strings. */
const WIDE_SCALARS = new Set([3, 4, 6, 16, 18]);

/** Every numeric (varint) field of `schema`, nested messages walked (to `depth` levels). */
export function numericPaths(schema: DescMessage, depth = 3, above: readonly DescField[] = []): NumericPath[] {
  const out: NumericPath[] = [];
  for (const field of schema.fields) {
    const fields = [...above, field];
    if (field.fieldKind === "scalar" && VARINT_SCALARS.has(field.scalar)) {
      out.push({ fields, name: fields.map((f) => f.name).join(".") });
    } else if (field.fieldKind === "message" && depth > 0) {
      out.push(...numericPaths(field.message, depth - 1, fields));
    }
  }
  return out;
}

function varint(value: bigint): number[] {
  let n = BigInt.asUintN(64, value);
  const out: number[] = [];
  while (n > 0x7fn) {
    out.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  out.push(Number(n));
  return out;
}

/** A field's tag and payload as bytes: the number as a raw varint (any 64 bits), a message's bytes length-delimited. */
function encodedField(field: DescField, payload: bigint | number[]): number[] {
  if (typeof payload === "bigint") return [...varint(BigInt((field.number << 3) | 0)), ...varint(payload)];
  return [...varint(BigInt((field.number << 3) | 2)), ...varint(BigInt(payload.length)), ...payload];
}

/**
 * Protobuf bytes of a valid request with the number at `path` set to `value` as raw varint bits
 * (what a hostile client can send whatever the field's type): the field is appended, so it wins
 * over the base's value (last one wins; messages merge).
 */
export function binaryWith(method: DescMethod, ids: Record<string, string>, path: NumericPath, value: bigint) {
  const base = toBinary(method.input, validRequest(method.input, ids));
  let payload: bigint | number[] = value;
  for (let i = path.fields.length - 1; i >= 0; i--) payload = encodedField(path.fields[i]!, payload);
  return Uint8Array.from([...base, ...(payload as number[])]);
}

/**
 * Connect JSON of a valid request with the number at `path` set to `value`: 64-bit numbers as JSON
 * strings (their canonical form), 32-bit ones as JSON numbers; nested members (a timestamp's
 * `seconds`) as objects, as a careless client writes them.
 */
export function jsonWith(method: DescMethod, ids: Record<string, string>, path: NumericPath, value: bigint): string {
  const json = toJson(method.input, validRequest(method.input, ids)) as JsonObject;
  const last = path.fields[path.fields.length - 1]!;
  const wide = last.fieldKind === "scalar" && WIDE_SCALARS.has(last.scalar);
  const placeholder = "\u0000number\u0000";
  let member: unknown = wide ? value.toString() : placeholder;
  for (let i = path.fields.length - 1; i > 0; i--) member = { [path.fields[i]!.jsonName]: member };
  // A JSON number of any size: written into the text (JSON.stringify has no bigint).
  return JSON.stringify({ ...json, [path.fields[0]!.jsonName]: member }).replace(
    JSON.stringify(placeholder),
    value.toString(),
  );
}
