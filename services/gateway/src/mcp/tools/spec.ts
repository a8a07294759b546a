import type { CallToolResult, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import { GetCubeRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { z } from "zod";
import { contractString } from "../contract-schema";
import type { McpSession } from "../session";

/** One MCP tool: what `tools/list` shows of it (name, title, annotations, schemas) and its run. */
interface ToolSpec<S extends z.ZodRawShape, O extends z.ZodRawShape> {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly annotations: ToolAnnotations;
  readonly input: S;
  readonly output: O;
  /** The upstream calls for one call of the tool and the result it renders. */
  readonly run: (session: McpSession, input: z.infer<z.ZodObject<S>>, signal: AbortSignal) => Promise<CallToolResult>;
}

/** A tool as the registry holds it (its input type erased). */
export type McpTool = ToolSpec<z.ZodRawShape, z.ZodRawShape>;

/** A tool's spec and run, typed by its schemas, for the registry. */
export function defineTool<S extends z.ZodRawShape, O extends z.ZodRawShape>(tool: ToolSpec<S, O>): McpTool {
  return tool as unknown as McpTool;
}

/** A cube, role or drone id: the contract's id rule. */
export const uuid = contractString(GetCubeRequestSchema, "cube_id");
/** A page size input. */
export const pageSize = z.number().int().positive().max(500).optional();
/** A page token input. */
export const pageToken = z.string().max(1024).optional();
/** An entry as its `#position` (what the lines show) or its id. */
export const ENTRY_REF = /^(#?[0-9]{1,15}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;
/** An entry reference input. */
export const entryRef = z.string().regex(ENTRY_REF).describe("#position or id");
/** The structured items of a read or a wait. */
export const items = z.array(z.object({ n: z.number(), notice: z.string().optional() }));

/** A tool that only reads. */
export const READ: ToolAnnotations = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};
/** A tool that writes. */
export const WRITE: ToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: false,
  openWorldHint: false,
};
/** A tool that writes and may be repeated. */
export const IDEMPOTENT: ToolAnnotations = { ...WRITE, idempotentHint: true };

/** A tool result: one text block and its structured content. */
export function ok(text: string, structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: "text", text }], structuredContent: structured };
}
