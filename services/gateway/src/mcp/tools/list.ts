import type { ListToolsResult, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { ENTRY_REF, type McpTool } from "./spec";

const UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";

/**
 * A JSON Schema without what costs a host tokens and tells it nothing (`$schema`, closed-object
 * flags); an output schema also without `required` (what a result always carries is the server's
 * promise, checked when the tool answers; a host reading the list needs only the shape).
 */
function leanSchema(schema: unknown, io: "input" | "output"): unknown {
  if (Array.isArray(schema)) return schema.map((item) => leanSchema(item, io));
  if (!schema || typeof schema !== "object") return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === "$schema" || (key === "additionalProperties" && value === false)) continue;
    if (io === "output" && key === "required") continue;
    // Implied: a uuid is not empty; an integer is within the safe range.
    if (key === "minLength" && value === 1 && (schema as { pattern?: string }).pattern === UUID_PATTERN) continue;
    if (key === "maximum" && value === Number.MAX_SAFE_INTEGER) continue;
    // A length a model never comes near (tokens, cursors, messages): checked on the server, not listed.
    if (key === "maxLength" && typeof value === "number" && value >= 1024) continue;
    // The contract's id rule (canonical lowercase UUID) is checked in full on the server; the list says uuid.
    if (key === "pattern" && value === UUID_PATTERN) out.format = "uuid";
    // An entry reference (`#41` or an id): its description says so; checked in full on the server.
    else if (key === "pattern" && value === ENTRY_REF.source) continue;
    // The contract's "no control characters" rule on text: checked on the server, not worth a line.
    else if (key === "pattern" && typeof value === "string" && value.startsWith("^[^\\x00-")) continue;
    else out[key] = leanSchema(value, io);
  }
  return out;
}

/** A tool's schema shape as JSON Schema, converted as the SDK converts it (draft-7, input or output side). */
function jsonSchema(shape: z.ZodRawShape, io: "input" | "output"): unknown {
  return leanSchema(z.toJSONSchema(z.object(shape), { target: "draft-7", io }), io);
}

/**
 * Annotations without the hints that say what the spec already defaults to, or what it ignores:
 * `readOnlyHint: false` and `idempotentHint: false` are the defaults, and a read-only tool's
 * `destructiveHint` / `idempotentHint` mean nothing. `openWorldHint: false` (the default is true)
 * and a writing tool's `destructiveHint: false` (the default is true) stay.
 */
function leanAnnotations(annotations: ToolAnnotations): ToolAnnotations {
  if (annotations.readOnlyHint) return { readOnlyHint: true, openWorldHint: annotations.openWorldHint ?? true };
  return {
    destructiveHint: annotations.destructiveHint ?? true,
    ...(annotations.idempotentHint ? { idempotentHint: true } : {}),
    openWorldHint: annotations.openWorldHint ?? true,
  };
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
      annotations: leanAnnotations(tool.annotations),
      inputSchema: jsonSchema(tool.input, "input") as ListToolsResult["tools"][number]["inputSchema"],
      outputSchema: jsonSchema(tool.output, "output") as ListToolsResult["tools"][number]["outputSchema"],
    })),
  };
}
