import { z } from "zod";

/** One side of a Standard JSON Schema converter (`~standard.jsonSchema.input` or `.output`). */
type Convert = (options: {
  readonly target: string;
  readonly libraryOptions?: Record<string, unknown>;
}) => Record<string, unknown>;

/** `convert` answering each target from the first conversion (the options carry no more than the target). */
function memo(convert: Convert): Convert {
  const done = new Map<string, Record<string, unknown>>();
  return (options) => {
    if (options.libraryOptions !== undefined) return convert(options);
    let json = done.get(options.target);
    if (json === undefined) {
      json = convert(options);
      done.set(options.target, json);
    }
    return json;
  };
}

/**
 * A tool's schema as a 2026-07-28 server registers it: `z.object(shape)` built once per process,
 * its JSON Schema converted once per side and target. That revision builds an MCP server per
 * request, and the SDK converts the called tool's input schema (for `Mcp-Param` headers) and its
 * output schema (to project the result) on each server: without this, every tool call paid for a
 * fresh `z.object` and two conversions. Validation is zod's own (`~standard.validate`).
 */
export function schemaOnce(shape: z.ZodRawShape) {
  const schema = z.object(shape);
  const standard = schema["~standard"];
  return {
    "~standard": {
      ...standard,
      jsonSchema: { input: memo(standard.jsonSchema.input), output: memo(standard.jsonSchema.output) },
    },
  } as Pick<typeof schema, "~standard">;
}
