import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { RunningCube } from "@unimatrix/cube";
import { eventually } from "@unimatrix/service-kit/testing";
import { PRUNED } from "../src/mcp/format";
import { modernPost, modernRpc } from "./mcp-2026";
import { addGateway, call, type System, seedTenant, startSystem } from "./system";

type Result = {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  content: { type: string; text: string }[];
};

/** An agent on the stock SDK v2 client, pinned to revision 2026-07-28 (no initialize, no session). */
async function statelessAgent(url: string, bearer: string) {
  const client = new Client(
    { name: "stateless-agent", version: "1.0.0" },
    { versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  const sessionIds: (string | null)[] = [];
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${bearer}` } },
    fetch: async (input: string | URL | Request, init?: RequestInit) => {
      const answer = await fetch(input, init);
      sessionIds.push(answer.headers.get("mcp-session-id"));
      return answer;
    },
  });
  await client.connect(transport);
  const tool = async (name: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name, arguments: args })) as Result;
  return { client, tool, sessionIds, close: () => client.close() };
}

/** A counter's value on a metrics page (0 when absent). */
async function counter(metricsUrl: string, line: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found ? Number(found.split(" ")[1]) : 0;
}

describe("gateway: MCP 2026-07-28, stateless, the seat held by the agent", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let other: Awaited<ReturnType<typeof addGateway>>;

  beforeAll(async () => {
    system = await startSystem("gw_mcp_stateless");
    acme = await seedTenant(system, "acme", 2);
    other = await addGateway(system);
  }, 120_000);
  afterAll(async () => {
    await other.stop();
    await system.stop();
  });

  it("attaches on one gateway and acts as that seat on another, with no session anywhere", async () => {
    const opened = 'unimatrix_gateway_mcp_sessions_total{event="opened"}';
    const before = [await counter(system.metricsUrl, opened), await counter(other.metricsUrl, opened)];
    const a = await statelessAgent(system.url, acme.clients[0]!.token);
    const b = await statelessAgent(other.url, acme.clients[1]!.token);
    try {
      expect(a.client.getNegotiatedProtocolVersion()).toBe("2026-07-28");
      const seatA = await a.tool("seat_attach", { cube_id: acme.cubeId });
      const seatB = await b.tool("seat_attach", { cube_id: acme.cubeId });
      const tokenA = seatA.structuredContent?.session_token as string;
      const tokenB = seatB.structuredContent?.session_token as string;
      expect(tokenA).toMatch(/^umx_/);
      expect(seatB.structuredContent?.label).not.toBe(seatA.structuredContent?.label);

      // A posts through the other gateway, naming its seat: no re-attach.
      const posted = await (await statelessAgent(other.url, acme.clients[0]!.token)).tool("log_post", {
        seat: tokenA,
        message: "built on B, said as A's seat",
        recipients: [seatB.structuredContent?.label as string],
      });
      expect(posted.isError).toBeFalsy();

      // B reads on gateway A with its seat: the direct is there, from A's drone, once.
      const read = await (await statelessAgent(system.url, acme.clients[1]!.token)).tool("log_read", {
        seat: tokenB,
      });
      const text = read.content[0]!.text;
      expect(text).toContain(`#1 ${seatA.structuredContent?.label} → you: built on B`);
      expect(text.split("built on B, said as A's seat").length - 1).toBe(1);

      // Read again: nothing new (the drone's inbox moved on in cube, not in a session).
      const again = await b.tool("log_read", { seat: tokenB });
      expect(again.content[0]!.text).not.toContain("built on B");

      // No MCP session was opened on either gateway, and no answer carried a session id.
      expect(await counter(system.metricsUrl, opened)).toBe(before[0]);
      expect(await counter(other.metricsUrl, opened)).toBe(before[1]);
      expect([...a.sessionIds, ...b.sessionIds].filter((id) => id !== null)).toEqual([]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("takes the drone session token as bearer for its own seat", async () => {
    const attach = await statelessAgent(system.url, acme.clients[0]!.token);
    const seat = await attach.tool("seat_attach", { cube_id: acme.cubeId });
    const token = seat.structuredContent?.session_token as string;
    const asDrone = await statelessAgent(other.url, token);
    try {
      const state = await asDrone.tool("log_post", { message: "said with the seat as bearer" });
      expect(state.isError).toBeFalsy();
      const read = await attach.tool("log_read", { seat: token, cursor: "" });
      expect(read.content[0]!.text).toContain("you → all: said with the seat as bearer");
    } finally {
      await Promise.all([attach.close(), asDrone.close()]);
    }
  });

  it("refuses a seat that is not a session token (naming the input), and an unknown one", async () => {
    const agent = await statelessAgent(system.url, acme.clients[0]!.token);
    try {
      const wrong = await agent.tool("log_read", { seat: acme.clients[1]!.token });
      expect(wrong.isError).toBe(true);
      expect(wrong.content[0]!.text).toBe("INVALID_ARGUMENT: seat: is not a session_token from seat_attach");

      const unknown = await agent.tool("log_read", { seat: "umx_drone_not-a-real-token" });
      expect(unknown.isError).toBe(true);
      expect(unknown.content[0]!.text).toMatch(/^UNAUTHENTICATED: /);

      // Without a seat, a drone tool says to attach one.
      const seatless = await agent.tool("log_read", {});
      expect(seatless.content[0]!.text).toBe("FAILED_PRECONDITION: no seat yet: call seat_attach first");
    } finally {
      await agent.close();
    }
  });

  it("serves a call by the tool its Mcp-Name names, also encoded, and answers an unknown name as the SDK does", async () => {
    const rpc = modernRpc(acme.clients[0]!.token);
    const listed = await rpc(system.url, "tools/list", {});
    expect((listed.result!.tools as unknown[]).length).toBe(16);
    const unknown = await rpc(system.url, "tools/call", { name: "no_such_tool", arguments: {} });
    expect(unknown.error).toEqual({ code: -32602, message: "Tool no_such_tool not found" });
    // The name as a Base64 sentinel (how a client sends a name that is not plain ASCII): still served.
    const response = await modernPost(
      system.url,
      "tools/call",
      { name: "cube_list", arguments: {} },
      acme.clients[0]!.token,
      1,
      { tasks: false, nameHeader: `=?base64?${Buffer.from("cube_list").toString("base64")}?=` },
    );
    const answer = (await response.json()) as { result?: { isError?: boolean; content: { text: string }[] } };
    expect(answer.result?.isError).toBeFalsy();
    expect(answer.result?.content[0]?.text).toContain(acme.cubeId);
  });

  it("leaves 2025-11-25 its sessions: initialize opens one, and its push stream starts with a retry", async () => {
    const headers = {
      authorization: `Bearer ${acme.clients[0]!.token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    };
    const init = await fetch(`${system.url}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "probe", version: "1" } },
      }),
    });
    const sessionId = init.headers.get("mcp-session-id");
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
    await init.text();
    const stop = new AbortController();
    const stream = await fetch(`${system.url}/mcp`, {
      headers: { ...headers, "mcp-session-id": sessionId! },
      signal: stop.signal,
    });
    expect(stream.headers.get("content-type")).toBe("text/event-stream");
    const first = await stream.body!.getReader().read();
    expect(new TextDecoder().decode(first.value)).toBe("retry: 1000\n\n");
    stop.abort();
  });

  it("listens on one gateway, that gateway goes away, and listens on another from its cursor: every entry once", async () => {
    const doomed = await addGateway(system);
    const writer = (
      await call<{ sessionToken: string }>(
        system,
        "unimatrix.cube.v1.CubeService/AttachSeat",
        { cubeId: acme.cubeId, roleId: acme.roleId, hostname: "writer" },
        acme.clients[1]!.token,
      )
    ).sessionToken;
    const post = (message: string) =>
      call(
        system,
        "unimatrix.cube.v1.ActivityService/AppendEntry",
        { cubeId: acme.cubeId, message, visibility: "VISIBILITY_BROADCAST" },
        writer,
      );
    const attach = await statelessAgent(system.url, acme.clients[0]!.token);
    const seat = (await attach.tool("seat_attach", { cube_id: acme.cubeId })).structuredContent
      ?.session_token as string;
    await attach.close();

    const heard: { line: string; cursor: string }[] = [];
    const listener = async (url: string, after?: string) => {
      const agent = await statelessAgent(url, acme.clients[0]!.token);
      agent.client.setNotificationHandler("notifications/resources/updated", (note) => {
        const meta = note.params._meta as Record<string, string>;
        expect(note.params.uri).toBe("unimatrix://inbox");
        heard.push({ line: meta.line!, cursor: meta.cursor! });
      });
      const uri = `unimatrix://inbox?seat=${encodeURIComponent(seat)}${after ? `&after=${encodeURIComponent(after)}` : ""}`;
      const subscription = await agent.client.listen({ resourceSubscriptions: [uri] });
      expect(subscription.honoredFilter).toEqual({ resourceSubscriptions: ["unimatrix://inbox"] });
      return { agent, subscription };
    };

    const first = await listener(doomed.url);
    for (let i = 1; i <= 5; i++) await post(`listen ${i}`);
    await eventually(() => heard.length === 5, "the first five on the doomed gateway");
    await doomed.stop();
    expect(await first.subscription.closed).not.toBe("local");
    await first.agent.close();
    for (let i = 6; i <= 10; i++) await post(`listen ${i}`);

    const second = await listener(other.url, heard.at(-1)!.cursor);
    for (let i = 11; i <= 15; i++) await post(`listen ${i}`);
    await eventually(() => heard.length >= 15, "all fifteen after listening again elsewhere");
    await second.subscription.close();
    await second.agent.close();
    // Each line is what log_read shows: `#<position> <writer's label> → all: listen <i>`, in order.
    const writerLabel = heard[0]!.line.split(" ")[1]!;
    expect(heard.map((h) => h.line.replace(/^#\d+ /, ""))).toEqual(
      Array.from({ length: 15 }, (_, i) => `${writerLabel} → all: listen ${i + 1}`),
    );
    expect(new Set(heard.map((h) => h.cursor)).size).toBe(15);
  });

  it("asks the cube's humans as a task: working until a person answers, then completed, on any gateway", async () => {
    const humanRole = await call<{ role: { id: string } }>(
      system,
      "unimatrix.cube.v1.CubeService/CreateRole",
      { cubeId: acme.cubeId, name: "human", humanSeat: true, canBroadcast: true },
      acme.user,
    );
    const human = await call<{ sessionToken: string }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: acme.cubeId, roleId: humanRole.role.id },
      acme.clients[1]!.token,
    );
    const agent = await statelessAgent(system.url, acme.clients[0]!.token);
    const seat = (await agent.tool("seat_attach", { cube_id: acme.cubeId })).structuredContent?.session_token as string;
    await agent.close();

    const rpc = modernRpc(acme.clients[0]!.token);

    const asked = await rpc(system.url, "tools/call", {
      name: "log_post",
      arguments: { seat, message: "May I restart the billing workers?", ask_human: true },
    });
    expect(asked.result).toMatchObject({ resultType: "task", status: "working", pollIntervalMs: 2000 });
    const taskId = asked.result!.taskId as string;
    const question = asked.result!.structuredContent as { n: number; id: string };

    // Polled on the other gateway: still working.
    const waiting = await rpc(other.url, "tasks/get", { taskId });
    expect(waiting.result).toMatchObject({ taskId, status: "working", resultType: "complete" });

    // A person answers (a human seat's reply): the task completes with the answer, on either gateway.
    await call(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      {
        cubeId: acme.cubeId,
        message: "Yes, one at a time.",
        visibility: "VISIBILITY_BROADCAST",
        replyToEntryId: question.id,
      },
      human.sessionToken,
    );
    for (const url of [other.url, system.url]) {
      const done = await rpc(url, "tasks/get", { taskId });
      expect(done.result).toMatchObject({ taskId, status: "completed" });
      const result = done.result!.result as { content: { text: string }[] };
      expect(result.content[0]!.text).toMatch(
        new RegExp(`^answer to #${question.n}: #\\d+ \\S+ → all \\(reply\\): Yes, one at a time\\.$`),
      );
    }

    // Cancel is acknowledged; an unknown task, or another credential's, is an invalid taskId.
    expect((await rpc(other.url, "tasks/cancel", { taskId })).result).toMatchObject({ resultType: "complete" });
    expect((await rpc(other.url, "tasks/get", { taskId: "made-up" })).error?.code).toBe(-32602);
    expect((await rpc(other.url, "tasks/get", { taskId }, acme.clients[1]!.token)).error).toMatchObject({
      code: -32602,
      message: expect.stringContaining("unknown task"),
    });

    // Without the extension declared, the same ask answers at once with the posted question.
    const plain = await statelessAgent(system.url, acme.clients[0]!.token);
    const posted = await plain.tool("log_post", { seat, message: "Another question?", ask_human: true });
    expect(posted.content[0]!.text).toMatch(/^posted #\d+$/);
    await plain.close();
  });

  it("parks a log_wait as a task: a broadcast does not wake a direct-only wait, the direct completes it, the same on every gateway", async () => {
    const agent = await statelessAgent(system.url, acme.clients[0]!.token);
    const attached = await agent.tool("seat_attach", { cube_id: acme.cubeId });
    const seat = attached.structuredContent?.session_token as string;
    const label = attached.structuredContent?.label as string;
    await agent.tool("log_read", { seat });
    await agent.close();
    const writer = (
      await call<{ sessionToken: string }>(
        system,
        "unimatrix.cube.v1.CubeService/AttachSeat",
        { cubeId: acme.cubeId, roleId: acme.roleId, hostname: "waker" },
        acme.clients[1]!.token,
      )
    ).sessionToken;
    const post = (message: string, recipientLabels: string[] = []) =>
      call(
        system,
        "unimatrix.cube.v1.ActivityService/AppendEntry",
        {
          cubeId: acme.cubeId,
          message,
          visibility: recipientLabels.length > 0 ? "VISIBILITY_DIRECT" : "VISIBILITY_BROADCAST",
          recipientLabels,
        },
        writer,
      );
    const rpc = modernRpc(acme.clients[0]!.token);

    const parked = await rpc(system.url, "tools/call", {
      name: "log_wait",
      arguments: { seat, only: "direct", timeout_s: 50 },
    });
    expect(parked.result).toMatchObject({ resultType: "task", status: "working", pollIntervalMs: 1000 });
    const taskId = parked.result!.taskId as string;
    expect((await rpc(other.url, "tasks/get", { taskId })).result).toMatchObject({ taskId, status: "working" });

    await post("for everyone, not what the wait is for");
    await post("for you alone", [label]);
    const seen: string[] = [];
    for (const url of [other.url, system.url, other.url]) {
      const done = await rpc(url, "tasks/get", { taskId });
      expect(done.result).toMatchObject({ taskId, status: "completed" });
      seen.push(JSON.stringify(done.result!.result));
    }
    // Every poll, on either gateway, answers the same result: the direct, not the broadcast before it.
    expect(new Set(seen).size).toBe(1);
    const text = (JSON.parse(seen[0]!) as { content: { text: string }[] }).content[0]!.text;
    expect(text).toMatch(/^#\d+ \S+ → you: for you alone\n\(log_read takes your inbox\)$/);

    // Polling moved nothing: the inbox still holds both, once each.
    const read = await rpc(system.url, "tools/call", { name: "log_read", arguments: { seat } });
    const lines = (read.result!.content as { text: string }[])[0]!.text.split("\n");
    expect(lines.filter((l) => l.endsWith("for everyone, not what the wait is for"))).toHaveLength(1);
    expect(lines.filter((l) => l.endsWith("for you alone"))).toHaveLength(1);

    // With something already waiting, the wait answers at once, not as a task.
    await post("already here", [label]);
    const now = await rpc(other.url, "tools/call", { name: "log_wait", arguments: { seat, timeout_s: 50 } });
    expect(now.result?.resultType).not.toBe("task");
    expect((now.result!.content as { text: string }[])[0]!.text).toContain("→ you: already here");

    // A parked wait whose time runs out completes with nothing new.
    const short = await rpc(system.url, "tools/call", { name: "log_wait", arguments: { seat, timeout_s: 1 } });
    const shortId = short.result!.taskId as string;
    let last: Record<string, unknown> | undefined;
    await eventually(async () => {
      last = (await rpc(other.url, "tasks/get", { taskId: shortId })).result;
      return last?.status === "completed";
    }, "the short wait's deadline");
    expect(last!.result).toMatchObject({
      content: [{ type: "text", text: "nothing new" }],
      structuredContent: { items: [] },
    });
  });

  it("a listen resuming below the retained floor hears once that older activity was pruned, then every entry after the floor", async () => {
    const team = await seedTenant(system, "retained", 2);
    const writer = (
      await call<{ sessionToken: string }>(
        system,
        "unimatrix.cube.v1.CubeService/AttachSeat",
        { cubeId: team.cubeId, roleId: team.roleId, hostname: "writer" },
        team.clients[1]!.token,
      )
    ).sessionToken;
    const post = (message: string) =>
      call<{ entry: { cursor: string } }>(
        system,
        "unimatrix.cube.v1.ActivityService/AppendEntry",
        { cubeId: team.cubeId, message, visibility: "VISIBILITY_BROADCAST" },
        writer,
      );
    const agent = await statelessAgent(system.url, team.clients[0]!.token);
    const seat = (await agent.tool("seat_attach", { cube_id: team.cubeId })).structuredContent?.session_token as string;
    // Keep the newest 3 positions, post five, and let the retention job prune below them.
    await call(
      system,
      "unimatrix.cube.v1.CubeService/UpdateCube",
      { cubeId: team.cubeId, retention: { maxItems: 3 } },
      team.user,
    );
    const r1 = (await post("r1")).entry.cursor;
    for (const m of ["r2", "r3", "r4", "r5"]) await post(m);
    expect((await (system.cube as RunningCube).retentionRound()).held).toBe(true);
    const { cube } = await call<{ cube: { floorCursor: string } }>(
      system,
      "unimatrix.cube.v1.CubeService/GetCube",
      { cubeId: team.cubeId },
      team.user,
    );

    const heard: { line: string; cursor: string }[] = [];
    agent.client.setNotificationHandler("notifications/resources/updated", (note) => {
      const meta = note.params._meta as Record<string, string>;
      heard.push({ line: meta.line!, cursor: meta.cursor! });
    });
    const subscription = await agent.client.listen({
      resourceSubscriptions: [`unimatrix://inbox?seat=${encodeURIComponent(seat)}&after=${encodeURIComponent(r1)}`],
    });
    await post("r6");
    await eventually(() => heard.some((h) => h.line.endsWith(": r6")), "a live entry after the reset");
    await subscription.close();
    await agent.close();
    expect(heard[0]).toEqual({ line: PRUNED, cursor: cube.floorCursor });
    expect(heard.slice(1).map((h) => h.line.replace(/^#\d+ \S+ → all: /, ""))).toEqual(["r3", "r4", "r5", "r6"]);
  });
});
