import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import type { McpSession } from "../src/mcp/session";
import { registerTools } from "../src/mcp/tools";

/** The input schemas the thirteen tools register, by tool name. */
function toolSchemas(): Map<string, z.ZodObject<z.ZodRawShape>> {
  const schemas = new Map<string, z.ZodObject<z.ZodRawShape>>();
  const server = {
    registerTool(name: string, config: { inputSchema: z.ZodRawShape }) {
      schemas.set(name, z.object(config.inputSchema));
    },
  };
  registerTools(server as unknown as McpServer, {} as McpSession);
  return schemas;
}

describe("MCP tool schemas read the contract's limits", () => {
  const tools = toolSchemas();
  const ok = (tool: string, input: object) => tools.get(tool)!.safeParse(input).success;

  test("decision_record: a title of 500 characters, as the service allows", () => {
    expect(ok("decision_record", { title: "t".repeat(500) })).toBe(true);
    expect(ok("decision_record", { title: "t".repeat(501) })).toBe(false);
    expect(ok("decision_record", { title: "" })).toBe(false);
  });

  test("log_post: the message limit is 32,768 UTF-8 bytes, not UTF-16 units", () => {
    expect(ok("log_post", { message: "é".repeat(16_384) })).toBe(true);
    expect(ok("log_post", { message: "é".repeat(16_385) })).toBe(false);
    expect(ok("log_post", { message: "x\u0000y" })).toBe(false);
    expect(ok("log_post", { message: "two\nlines\tok" })).toBe(true);
    expect(ok("log_post", { message: "hi", kind: "k".repeat(65) })).toBe(false);
  });

  test("ids are canonical lowercase UUIDs; placement ids use the contract's pattern", () => {
    const id = "0e8b1f62-7a4b-4c9e-9a3e-4b2f1c0d9e8a";
    expect(ok("log_ack", { entry_id: id })).toBe(true);
    expect(ok("log_ack", { entry_id: id.toUpperCase() })).toBe(false);
    expect(ok("device_placement_get", { root_session_id: "run:1.a" })).toBe(true);
    expect(ok("device_placement_get", { root_session_id: "a b" })).toBe(false);
  });

  test("the JSON schema a client sees carries the numbers", () => {
    const json = z.toJSONSchema(tools.get("decision_record")!) as unknown as {
      properties: { title: { maxLength: number } };
    };
    expect(json.properties.title.maxLength).toBe(500);
  });
});
