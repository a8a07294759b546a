import type { ListToolsResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { ENTRY_REF, type McpTool } from "./spec";

const UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";

/** A JSON Schema without what costs a host tokens and tells it nothing (`$schema`, closed-object flags). */
function leanSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(leanSchema);
  if (!schema || typeof schema !== "object") return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === "$schema" || (key === "additionalProperties" && value === false)) continue;
    // Implied: a uuid is not empty; an integer is within the safe range.
    if (key === "minLength" && value === 1 && (schema as { pattern?: string }).pattern === UUID_PATTERN) continue;
    if (key === "maximum" && value === Number.MAX_SAFE_INTEGER) continue;
    // The contract's id rule (canonical lowercase UUID) is checked in full on the server; the list says uuid.
    if (key === "pattern" && value === UUID_PATTERN) out.format = "uuid";
    // An entry reference (`#41` or an id): its description says so; checked in full on the server.
    else if (key === "pattern" && value === ENTRY_REF.source) continue;
    // The contract's "no control characters" rule on text: checked on the server, not worth a line.
    else if (key === "pattern" && typeof value === "string" && value.startsWith("^[^\\x00-")) continue;
    else out[key] = leanSchema(value);
  }
  return out;
}

/** A tool's schema shape as JSON Schema, converted as the SDK converts it (draft-7, input or output side). */
function jsonSchema(shape: z.ZodRawShape, io: "input" | "output"): unknown {
  return leanSchema(z.toJSONSchema(z.object(shape), { target: "draft-7", io }));
}

/**
 * The `tools/list` answer, kept lean (agents pay for it on every session): written from the tool
 * specs with only the fields a host uses (no `execution`), schemas without `$schema` and
 * `additionalProperties: false`, UUID patterns as `format: uuid` (inputs are still checked against
 * the full contract rule when a tool is called).
 */
export function toolList(tools: readonly McpTool[]): ListToolsResult {
  return {
    tools: tools.map((tool) => ({
      name: tool.name,
      title: tool.title,
      description: tool.description,
      annotations: tool.annotations,
      inputSchema: jsonSchema(tool.input, "input") as ListToolsResult["tools"][number]["inputSchema"],
      outputSchema: jsonSchema(tool.output, "output") as ListToolsResult["tools"][number]["outputSchema"],
    })),
  };
}
