/** A JSON-RPC answer of `/mcp`. */
export interface RpcAnswer {
  readonly result?: Record<string, unknown>;
  readonly error?: { code: number; message: string };
}

/**
 * Requests of MCP revision 2026-07-28 as any HTTP client sends them (fetch): the `_meta` envelope
 * with the tasks extension declared, and the `Mcp-Method` / `Mcp-Name` headers the spec asks for.
 */
export function modernRpc(bearer: string) {
  let id = 0;
  return async (url: string, method: string, params: Record<string, unknown>, as = bearer): Promise<RpcAnswer> => {
    const name = (params.name ?? params.taskId) as string | undefined;
    const answer = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${as}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
        ...(name ? { "mcp-name": name } : {}),
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: ++id,
        method,
        params: {
          ...params,
          _meta: {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
          },
        },
      }),
    });
    return (await answer.json()) as RpcAnswer;
  };
}
