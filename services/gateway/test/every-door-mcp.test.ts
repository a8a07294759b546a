import { eventually } from "@unimatrix/service-kit/testing";
import { addGateway, call, connectJson, type System, seedTenant, startSystem } from "./system";

// The MCP face and new calls after a credential change: the push stream ends with a notice within
// 1 s, an old session answers nothing but tool calls (and those say why), and a drone's writes
// are refused on every gateway as soon as the news arrives — not when a cache period runs out.

type Tenant = Awaited<ReturnType<typeof seedTenant>>;

const ACCEPT = "application/json, text/event-stream";

/** The JSON-RPC answer of a POST to `/mcp` (plain JSON or one SSE message). */
async function rpc(
  url: string,
  token: string,
  body: Record<string, unknown>,
  session?: string,
): Promise<{ status: number; session: string | null; answer: Record<string, unknown> | undefined }> {
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: ACCEPT,
      authorization: `Bearer ${token}`,
      ...(session ? { "mcp-session-id": session } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", ...body }),
  });
  const text = await response.text();
  const json = text.startsWith("{") ? text : /^data: (.*)$/m.exec(text)?.[1];
  return {
    status: response.status,
    session: response.headers.get("mcp-session-id"),
    answer: json ? (JSON.parse(json) as Record<string, unknown>) : undefined,
  };
}

/** An MCP session of `token` with a seat in the tenant's cube. */
async function seatedSession(url: string, token: string, tenant: Tenant): Promise<string> {
  const init = await rpc(url, token, {
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "door-test", version: "1" } },
  });
  expect(init.status).toBe(200);
  const session = init.session!;
  await rpc(url, token, { method: "notifications/initialized" }, session);
  const attach = await rpc(
    url,
    token,
    {
      id: 2,
      method: "tools/call",
      params: { name: "seat_attach", arguments: { cube_id: tenant.cubeId, role_id: tenant.roleId } },
    },
    session,
  );
  expect(attach.answer?.result).toMatchObject({ content: expect.any(Array) });
  expect((attach.answer?.result as { isError?: boolean } | undefined)?.isError).toBeFalsy();
  return session;
}

/** The push stream (`GET /mcp`) of a session: open once its headers arrived; its frames as they come. */
async function push(url: string, token: string, session: string) {
  const controller = new AbortController();
  const response = await fetch(`${url}/mcp`, {
    headers: { accept: "text/event-stream", authorization: `Bearer ${token}`, "mcp-session-id": session },
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  let text = "";
  void (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
    }
  })().catch(() => {});
  return { revoked: () => text.includes('"access_revoked"'), close: () => controller.abort() };
}

describe("every door closes with its credential: MCP and new calls", () => {
  let system: System;
  let tenant: Tenant;
  let second: Awaited<ReturnType<typeof addGateway>>;

  beforeAll(async () => {
    system = await startSystem("gw_doors_mcp");
    second = await addGateway(system);
    tenant = await seedTenant(system, "doorsmcp", 0);
  }, 120_000);
  afterAll(async () => {
    await second?.stop();
    await system?.stop();
  });

  async function freshClient(): Promise<{ id: string; token: string }> {
    const client = await call<{ client: { id: string }; token: string }>(
      system,
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name: `mcp-door-${crypto.randomUUID().slice(0, 8)}` },
      tenant.user,
    );
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: client.client.id, cubeId: tenant.cubeId, access: "CUBE_ACCESS_WRITE" },
      tenant.user,
    );
    return { id: client.client.id, token: client.token };
  }

  test.each(["RotateClientCredential", "RevokeClient"])(
    "%s: the MCP push on each gateway ends with access_revoked within 1 s; the old session answers only tool calls, saying so",
    async (change) => {
      const client = await freshClient();
      const urls = [system.url, second.url];
      const sessions = await Promise.all(urls.map((url) => seatedSession(url, client.token, tenant)));
      const pushes = await Promise.all(urls.map((url, i) => push(url, client.token, sessions[i]!)));
      try {
        await call(system, `unimatrix.cube.v1.IdentityService/${change}`, { clientId: client.id }, tenant.user);
        for (const stream of pushes) await eventually(stream.revoked, `${change}: push access_revoked`, 1_000);
        for (const [i, url] of urls.entries()) {
          const session = sessions[i]!;
          // Nothing but tool calls: tools/list and logging/setLevel (a write to the session store) are refused.
          expect((await rpc(url, client.token, { id: 3, method: "tools/list" }, session)).status).toBe(401);
          const setLevel = { id: 4, method: "logging/setLevel", params: { level: "error" } };
          expect((await rpc(url, client.token, setLevel, session)).status).toBe(401);
          const reopened = await fetch(`${url}/mcp`, {
            headers: {
              accept: "text/event-stream",
              authorization: `Bearer ${client.token}`,
              "mcp-session-id": session,
            },
          });
          expect(reopened.status).toBe(401);
          // A tool call is a tool error saying why, never a bare transport failure.
          const post = await rpc(
            url,
            client.token,
            { id: 5, method: "tools/call", params: { name: "log_post", arguments: { message: "after the change" } } },
            session,
          );
          expect(post.status).toBe(200);
          const result = post.answer?.result as { isError?: boolean; content: { text: string }[] };
          expect(result.isError).toBe(true);
          expect(result.content[0]!.text).toMatch(/revoked|rotated|no longer valid/i);
        }
      } finally {
        for (const stream of pushes) stream.close();
      }
    },
    60_000,
  );

  test("after a rotation a drone's writes are refused on every gateway as soon as the news arrives, its caches warm", async () => {
    const client = await freshClient();
    const seat = await call<{ sessionToken: string }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: tenant.cubeId, roleId: tenant.roleId },
      client.token,
    );
    const append = (url: string, message: string) =>
      connectJson(
        { url },
        "unimatrix.cube.v1.ActivityService/AppendEntry",
        { cubeId: tenant.cubeId, message, visibility: "VISIBILITY_BROADCAST" },
        seat.sessionToken,
      );
    for (const url of [system.url, second.url])
      expect(await append(url, "before the rotation")).toMatchObject({ status: 200 });
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/RotateClientCredential",
      { clientId: client.id },
      tenant.user,
    );
    // The gateways' caches would trust the answer for GATEWAY_AUTH_CACHE_MS (5 s); the news ends it at once.
    let accepted = 0;
    await eventually(
      async () => {
        const answers = await Promise.all([system.url, second.url].map((url) => append(url, "after the rotation")));
        accepted += answers.filter((a) => a.status === 200).length;
        return answers.every((a) => a.status === 401);
      },
      "401 from both gateways",
      500,
    );
    const read = await call<{ items: { entry?: { message: string } }[] }>(
      system,
      "unimatrix.cube.v1.ActivityService/ReadActivity",
      { cubeId: tenant.cubeId, pageSize: 500 },
      tenant.user,
    );
    // Nothing half-done: exactly the writes that were answered 200 are in the log.
    expect(read.items.filter((i) => i.entry?.message === "after the rotation")).toHaveLength(accepted);
  }, 30_000);
});
