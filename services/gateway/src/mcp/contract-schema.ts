import type { DescMessage } from "@bufbuild/protobuf";
import { stringLimits } from "@unimatrix/service-kit/grpc";
import { z } from "zod";

/**
 * A tool input string with the limits the contract writes for `schema.name` (lengths, bytes,
 * pattern), read from its `buf.validate` rules so the MCP schema and the service never drift.
 * JSON Schema counts characters, so a byte limit also bounds the characters and is checked exactly.
 */
export function contractString(schema: DescMessage, name: string): z.ZodString {
  const limits = stringLimits(schema, name);
  let out = z.string();
  const min = Math.max(limits.minLen ?? 0, limits.minBytes ?? 0, limits.required ? 1 : 0);
  if (min > 0) out = out.min(min);
  const max = limits.maxLen ?? limits.maxBytes;
  if (max !== undefined) out = out.max(max);
  if (limits.pattern) out = out.regex(new RegExp(limits.pattern, "u"));
  const maxBytes = limits.maxBytes;
  if (maxBytes !== undefined) {
    out = out.refine((value) => Buffer.byteLength(value, "utf8") <= maxBytes, {
      message: `must be at most ${maxBytes} UTF-8 bytes`,
    });
  }
  return out;
}
