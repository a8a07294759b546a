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
  return async (url: string, method: string, params: Record<string, unknown>, as = bearer): Promise<RpcAnswer> =>
    (await modernPost(url, method, params, as, ++id)).json() as Promise<RpcAnswer>;
}

/**
 * One 2026-07-28 request as fetch sends it; `tasks: false` leaves the tasks extension undeclared,
 * `nameHeader` sends `Mcp-Name` as given (e.g. a Base64 sentinel) instead of the plain name.
 */
export function modernPost(
  url: string,
  method: string,
  params: Record<string, unknown>,
  bearer: string,
  id: number,
  { tasks = true, nameHeader }: { tasks?: boolean; nameHeader?: string } = {},
): Promise<Response> {
  const name = nameHeader ?? ((params.name ?? params.taskId) as string | undefined);
  return fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${bearer}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": method,
      ...(name ? { "mcp-name": name } : {}),
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id,
      method,
      params: {
        ...params,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": tasks
            ? { extensions: { "io.modelcontextprotocol/tasks": {} } }
            : {},
        },
      },
    }),
  });
}

/** A `subscriptions/listen` read as it streams: every JSON-RPC message in order, and when it ended. */
export async function modernListen(url: string, bearer: string, params: Record<string, unknown>) {
  const answer = await modernPost(url, "subscriptions/listen", params, bearer, 1);
  const messages: { method?: string; params?: Record<string, unknown>; result?: Record<string, unknown> }[] = [];
  const reader = answer.body!.pipeThrough(new TextDecoderStream()).getReader();
  const ended = (async () => {
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += value;
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const data = buffer
          .slice(0, end)
          .split("\n")
          .filter((line) => line.startsWith("data: "))
          .map((line) => line.slice(6))
          .join("\n");
        if (data) messages.push(JSON.parse(data));
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf("\n\n");
      }
    }
  })();
  return { status: answer.status, messages, ended, cancel: () => reader.cancel() };
}
