import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { eventually } from "@unimatrix/service-kit/testing";
import { call, type System, seedTenant, startSystem } from "./system";

const TOOLS = [
  "cube_get",
  "cube_list",
  "decision_list",
  "decision_record",
  "device_placement_get",
  "directive_update",
  "drones_list",
  "log_ack",
  "log_claim",
  "log_post",
  "log_read",
  "log_wait",
  "machines_list",
  "receipts",
  "seat_attach",
  "seat_state",
];

/** A push: an item's text line (`#41 worker-2 → you: …`), or a notice about the stream (`{event, message}`). */
type Pushed = string | { readonly event: string; readonly message?: string };

/** The pushed lines only. */
const lines = (pushed: readonly Pushed[]) => pushed.filter((p): p is string => typeof p === "string");

/** An agent: the MCP SDK client over streamable HTTP, with what the server pushed to it. */
async function agent(system: System, token: string) {
  const client = new Client({ name: "test-agent", version: "1.0.0" });
  const pushed: Pushed[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    pushed.push(notification.params.data as Pushed);
  });
  const transport = new StreamableHTTPClientTransport(new URL(`${system.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  const tool = async (name: string, args: Record<string, unknown> = {}) => {
    const result = await client.callTool({ name, arguments: args });
    return result as { isError?: boolean; structuredContent?: Record<string, unknown>; content: { text: string }[] };
  };
  return { client, pushed, tool, close: () => client.close() };
}

describe("gateway: MCP", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    system = await startSystem("gw_mcp");
    acme = await seedTenant(system, "acme", 3);
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  it("offers the thirteen original tools, log_wait, seat_state and receipts, each with a JSON Schema for its input", async () => {
    const a = await agent(system, acme.clients[0]!.token);
    try {
      const { tools } = await a.client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
      for (const tool of tools) expect(tool.inputSchema.type).toBe("object");
    } finally {
      await a.close();
    }
  });

  it("acts as the attached drone: direct posts reach only their recipient, acks tell the author, claims are exclusive", async () => {
    const [a, b, c] = await Promise.all(acme.clients.map((client) => agent(system, client.token)));
    try {
      const attach = async (x: NonNullable<typeof a>) => {
        const result = await x.tool("seat_attach", { cube_id: acme.cubeId, role_id: acme.roleId });
        expect(result.isError).toBeFalsy();
        return result.structuredContent!.drone_id as string;
      };
      const [droneA, droneB] = [await attach(a!), await attach(b!)];
      await attach(c!);

      const direct = await a!.tool("log_post", { message: "for B only", visibility: "direct", recipients: [droneB] });
      expect(direct.isError).toBeFalsy();
      const directId = direct.structuredContent!.id as string;
      const directAt = direct.structuredContent!.n as number;
      await eventually(
        () => lines(b!.pushed).some((l) => new RegExp(`^#${directAt} \\S+ → you: for B only$`).test(l)),
        "B to receive the direct entry as its line",
      );

      const broadcast = await a!.tool("log_post", { message: "who takes this?" });
      const broadcastId = broadcast.structuredContent!.id as string;
      const broadcastAt = broadcast.structuredContent!.n as number;
      await eventually(
        () => lines(c!.pushed).some((l) => l.startsWith(`#${broadcastAt} `) && l.endsWith("→ all: who takes this?")),
        "C to receive the broadcast",
      );
      expect(lines(c!.pushed).some((l) => l.includes("for B only"))).toBe(false);

      const ack = await b!.tool("log_ack", { entry_id: directId });
      expect(ack.structuredContent!.acked).toBe(true);
      expect(ack.content[0]!.text).toBe("acked");
      // A is told of the ack in one line: `#n ack by <B>: for B only` (the entry by its preview).
      await eventually(
        () => lines(a!.pushed).some((l) => /^#\d+ ack by \S+: for B only$/.test(l)),
        "A to be told of the ack",
      );

      const claim = await b!.tool("log_claim", { entry_id: broadcastId });
      expect(claim.structuredContent!.outcome).toBe("claimed");
      // C is told of the claim, with the entry's id (a claim is something a next call may take over).
      await eventually(
        () => lines(c!.pushed).some((l) => /^#\d+ claim by \S+ on /.test(l) && l.includes(broadcastId)),
        "C to be told of the claim",
      );
      const second = await c!.tool("log_claim", { entry_id: broadcastId });
      expect(second.structuredContent).toMatchObject({ outcome: "already_claimed", holder_drone_id: droneB });
      expect(second.content[0]!.text).toContain("already_claimed");
      expect(droneA).not.toBe(droneB);
    } finally {
      await Promise.all([a, b, c].map((x) => x?.close()));
    }
  });

  it("posts to labels in reply to a #position with exactly one upstream call: cube resolves the references", async () => {
    const [a, b] = await Promise.all(acme.clients.slice(0, 2).map((client) => agent(system, client.token)));
    try {
      await a!.tool("seat_attach", { cube_id: acme.cubeId, role_id: acme.roleId });
      const seatB = await b!.tool("seat_attach", { cube_id: acme.cubeId, role_id: acme.roleId });
      const labelB = seatB.structuredContent!.label as string;
      const root = await a!.tool("log_post", { message: "root" });
      const n = root.structuredContent!.n as number;
      const started = async () => {
        const counts = new Map<string, number>();
        for (const v of (await system.cube.metrics.started.get()).values)
          counts.set(`${v.labels.grpc_service}/${v.labels.grpc_method}`, v.value);
        return counts;
      };
      const before = await started();
      const reply = await a!.tool("log_post", { message: "to you", recipients: [labelB], reply_to: `#${n}` });
      expect(reply.isError).toBeFalsy();
      const after = await started();
      const calls = [...after].flatMap(([method, value]) => {
        const delta = value - (before.get(method) ?? 0);
        return delta > 0 ? [[method, delta]] : [];
      });
      expect(calls).toEqual([["unimatrix.cube.v1.ActivityService/AppendEntry", 1]]);
      const thread = await b!.tool("log_read", { thread: `#${n}` });
      expect(thread.content[0]!.text.split("\n").slice(1)).toEqual([
        expect.stringMatching(new RegExp(`^#${n} .*: root$`)),
        expect.stringMatching(new RegExp(`^#${reply.structuredContent!.n} .*→ you.*: to you$`)),
      ]);
    } finally {
      await Promise.all([a, b].map((x) => x?.close()));
    }
  });

  it("gives a returning agent what it missed through log_read unread", async () => {
    const poster = await agent(system, acme.clients[0]!.token);
    let away = await agent(system, acme.clients[2]!.token);
    try {
      await poster.tool("seat_attach", { cube_id: acme.cubeId, role_id: acme.roleId });
      const seat = await away.tool("seat_attach", { cube_id: acme.cubeId, role_id: acme.roleId });
      const droneId = seat.structuredContent!.drone_id as string;
      const saved = seat.structuredContent!.session_token as string;
      expect(saved).toMatch(/^umx_drone_/);
      await away.tool("log_read", { unread: true, page_size: 500 }); // inbox now empty
      await away.close();
      await poster.tool("log_post", { message: "while you were out 1" });
      await poster.tool("log_post", { message: "while you were out 2" });
      away = await agent(system, acme.clients[2]!.token);
      // A new MCP session resumes the seat with the saved session token.
      const back = await away.tool("seat_attach", { cube_id: acme.cubeId, role_id: acme.roleId, session_token: saved });
      expect(back.structuredContent).toMatchObject({ outcome: "reused", drone_id: droneId });
      const unread = await away.tool("log_read", { unread: true, page_size: 500 });
      const lines = unread.content[0]!.text.split("\n");
      expect(lines[0]).toBe("2 unread");
      expect(lines.slice(1).map((line) => line.replace(/^#\d+ worker-\d+ /, ""))).toEqual([
        "→ all: while you were out 1",
        "→ all: while you were out 2",
      ]);
      expect((unread.structuredContent!.items as unknown[]).length).toBe(2);
    } finally {
      await poster.close();
      await away.close();
    }
  });

  it("reports tool errors with a readable message", async () => {
    const a = await agent(system, acme.clients[0]!.token);
    try {
      const unseated = await a.tool("log_post", { message: "nobody home" });
      expect(unseated.isError).toBe(true);
      expect(unseated.content[0]!.text).toBe("FAILED_PRECONDITION: no seat yet: call seat_attach first");
      const bare = await a.tool("drones_list");
      expect(bare.content[0]!.text).toMatch(/^INVALID_ARGUMENT: cube_id: required until you attach a seat/);
      // A tool without a cube_id input never asks for one.
      for (const [name, args] of [
        ["log_ack", { entry_id: "#1" }],
        ["log_read", { cursor: "" }],
        ["decision_list", {}],
      ] as const) {
        expect((await a.tool(name, args)).content[0]!.text).toBe(
          "FAILED_PRECONDITION: no seat yet: call seat_attach first",
        );
      }
      // Errors name the tool's own inputs, not the contract's fields.
      await a.tool("seat_attach", { cube_id: acme.cubeId });
      const nobody = await a.tool("log_post", { message: "hi", recipients: ["nobody-9"] });
      expect(nobody.content[0]!.text).toBe("INVALID_ARGUMENT: recipients: no live drone labelled nobody-9");
      const stranger = await a.tool("log_post", {
        message: "hi",
        recipients: ["00000000-0000-4000-8000-000000000000"],
      });
      expect(stranger.content[0]!.text).toMatch(/^INVALID_ARGUMENT: recipients/);
      const missing = await a.tool("log_ack", { entry_id: "#999999" });
      expect(missing.content[0]!.text).toBe("NOT_FOUND: entry_id: no entry #999999 visible to you");
      const since = await a.tool("drones_list", { since: "yesterday-ish" });
      expect(since.content[0]!.text).toBe("INVALID_ARGUMENT: since: must be a #position, an entry id or an ISO time");
      const foreign = await a.tool("cube_get", { cube_id: "00000000-0000-4000-8000-000000000000" });
      expect(foreign.isError).toBe(true);
      expect(foreign.content[0]!.text).toMatch(/^NOT_FOUND: /);
    } finally {
      await a.close();
    }
  });

  it("reads another cube the bearer may see as the bearer, even while seated elsewhere", async () => {
    const other = await call<{ cube: { id: string } }>(
      system,
      "unimatrix.cube.v1.CubeService/CreateCube",
      { requestKey: crypto.randomUUID(), name: "second cube", directive: "elsewhere" },
      acme.user,
    );
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: acme.clients[0]!.id, cubeId: other.cube.id, access: "CUBE_ACCESS_READ" },
      acme.user,
    );
    const a = await agent(system, acme.clients[0]!.token);
    try {
      await a.tool("seat_attach", { cube_id: acme.cubeId, role_id: acme.roleId });
      const seen = await a.tool("cube_get", { cube_id: other.cube.id });
      expect(seen.isError).toBeFalsy();
      expect(seen.content[0]!.text).toMatch(/^second cube: elsewhere$/m);
      const own = await a.tool("cube_get");
      expect(own.content[0]!.text).toMatch(/^acme cube: /);
    } finally {
      await a.close();
    }
  });

  it("refuses /mcp without a valid bearer token", async () => {
    const response = await fetch(`${system.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
    });
    expect(response.status).toBe(401);
  });

  it("lists machines as they link and unlink", async () => {
    const machine = await call<{ machine: { id: string }; token: string }>(
      system,
      "unimatrix.presence.v1.MachineService/RegisterMachine",
      { name: "runner-7" },
      acme.user,
    );
    const a = await agent(system, acme.clients[0]!.token);
    const links = createClient(LinkService, `127.0.0.1:${system.presence.port}`);
    const linked = async () => {
      const result = await a.tool("machines_list");
      const line = result.content[0]!.text.split("\n").find((l) => l.includes(machine.machine.id));
      return line?.includes(": linked since") === true;
    };
    try {
      expect(await linked()).toBe(false);
      const link = links.link({ metadata: { authorization: `Bearer ${machine.token}` } });
      link.call.on("error", () => {});
      link.send({ event: { case: "hello", value: { agentVersion: "test", hostname: "runner-7" } } });
      await eventually(linked, "the machine to show as linked");
      link.cancel();
      await eventually(async () => !(await linked()), "the machine to show as unlinked");
    } finally {
      links.close();
      await a.close();
    }
  });
});
