import { classifyInboundRequest } from "@modelcontextprotocol/server";
import { plainlyModern } from "../src/mcp/modern";

const META = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": {},
};

/** Bodies a client (or an attacker) may post to `/mcp`, of every shape the SDK's classifier tells apart. */
const BODIES: unknown[] = [
  { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "log_post", arguments: {}, _meta: META } },
  { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "log_post", arguments: {} } },
  { jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: META } },
  { jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: META } },
  { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {} } },
  { jsonrpc: "2.0", id: 1, method: "subscriptions/listen", params: { _meta: META } },
  { jsonrpc: "2.0", method: "notifications/initialized" },
  { jsonrpc: "2.0", method: "notifications/cancelled", params: { _meta: META, requestId: 1 } },
  { jsonrpc: "2.0", id: 1, result: {} },
  { jsonrpc: "2.0", id: 1, method: "tools/call", result: {} },
  { jsonrpc: "2.0", id: 1, error: { code: -1, message: "x" } },
  [{ jsonrpc: "2.0", id: 1, method: "tools/list" }],
  [],
  { jsonrpc: "2.0", id: 1, method: 7 },
  { method: "tools/call" },
  "tools/call",
  null,
];

describe("gateway: /mcp's fast route to the SDK's 2026-07-28 entry", () => {
  it("takes only requests the SDK's own classifier keeps from the 2025 leg and from the listen router", () => {
    let fast = 0;
    for (const method of ["POST", "GET", "DELETE"]) {
      for (const version of [undefined, "2025-11-25", "2026-07-28", " 2026-07-28\t", "2027-01-01"]) {
        for (const body of BODIES) {
          if (!plainlyModern(method, version, body)) continue;
          fast++;
          const outcome = classifyInboundRequest({ httpMethod: method, protocolVersionHeader: version, body });
          expect(outcome.kind).not.toBe("legacy");
          if (outcome.kind === "modern") expect(outcome.message.method).not.toBe("subscriptions/listen");
        }
      }
    }
    // POSTs naming one of the three modern versions, with the eight bodies that are one message
    // with a method (not a listen, no result or error): both tools/call, tools/list, discover,
    // initialize, the two notifications and the bare `{ method }`.
    expect(fast).toBe(3 * 8);
  });
});
