import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import type { RunningCube } from "@unimatrix/cube";
import { eventually } from "@unimatrix/service-kit/testing";
import { call, type System, seedTenant, startSystem, waitEventAfter, waitEvents } from "./system";

interface Result {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  content: { type: string; text: string }[];
}

/** An agent on the MCP SDK client, reading text; `pushed` holds its push notifications' data. */
async function agent(system: System, token: string) {
  const client = new Client({ name: "coordination-agent", version: "1.0.0" });
  /** Pushed lines (`#41 worker-2 → all: …`, `#42 ack by worker-2: …`); stream notices are left out. */
  const pushed: string[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    if (typeof n.params.data === "string") pushed.push(n.params.data);
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${system.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  const tool = async (name: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name, arguments: args }, undefined, { timeout: 70_000 })) as Result;
  const text = async (name: string, args: Record<string, unknown> = {}) => {
    const result = await tool(name, args);
    if (result.isError) throw new Error(`${name}: ${result.content[0]?.text}`);
    return result.content[0]!.text;
  };
  return { client, tool, text, pushed, close: () => client.close() };
}

const position = (posted: string) => /^posted (#\d+)$/.exec(posted)![1]!;

describe("gateway: MCP coordination tools (issue 16)", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let humanRole: string;

  beforeAll(async () => {
    system = await startSystem("gw_mcp_coord");
    acme = await seedTenant(system, "acme", 4);
    humanRole = (
      await call<{ role: { id: string } }>(
        system,
        "unimatrix.cube.v1.CubeService/CreateRole",
        { cubeId: acme.cubeId, name: "operator", humanSeat: true, canBroadcast: true },
        acme.user,
      )
    ).role.id;
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  it("keeps tools/list within 10,000 characters with the coordination tools", async () => {
    const a = await agent(system, acme.clients[0]!.token);
    try {
      const { tools } = await a.client.listTools();
      expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(["seat_state", "receipts", "log_wait"]));
      expect(tools).toHaveLength(16);
      expect(JSON.stringify(tools).length).toBeLessThanOrEqual(10_000);
      for (const t of tools) {
        expect(t.title).toBeTruthy();
        expect(t.outputSchema?.type).toBe("object");
        // Hints at their spec defaults are left out: a reader says only readOnlyHint; a writer says
        // whether it destroys (only directive_update replaces what was there) and whether it may be
        // repeated. None reaches outside Unimatrix.
        expect(t.annotations).toEqual(
          t.annotations?.readOnlyHint
            ? { readOnlyHint: true, openWorldHint: false }
            : {
                destructiveHint: t.name === "directive_update",
                openWorldHint: false,
                ...(t.annotations?.idempotentHint ? { idempotentHint: true } : {}),
              },
        );
      }
      expect(a.client.getInstructions()).toMatch(/seat_attach[\s\S]*log_read[\s\S]*log_wait[\s\S]*log_post/);
    } finally {
      await a.close();
    }
  });

  it("threads: a reply by #position, read in order, and a wait on the thread returns the reply", async () => {
    const [a, b] = [await agent(system, acme.clients[0]!.token), await agent(system, acme.clients[1]!.token)];
    try {
      await a.text("seat_attach", { cube_id: acme.cubeId });
      await b.text("seat_attach", { cube_id: acme.cubeId });
      const root = position(await a.text("log_post", { message: "which ledger format?" }));
      await a.text("log_read");
      const [listening, passed] = [
        await waitEvents(system.metricsUrl, "listening"),
        await waitEvents(system.metricsUrl, "passed"),
      ];
      let settled = false;
      const waiting = a.text("log_wait", { thread: root, timeout_s: 40 }).finally(() => {
        settled = true;
      });
      await waitEventAfter(system.metricsUrl, "listening", listening);
      await b.text("log_post", { message: "unrelated chatter" });
      // The chatter reached the thread wait and passed it by: still waiting.
      await waitEventAfter(system.metricsUrl, "passed", passed);
      expect(settled).toBe(false);
      const reply = position(await b.text("log_post", { message: "v2, the one with cents", reply_to: root }));
      const woke = await waiting;
      expect(woke).toMatch(new RegExp(`^${reply} \\S+ → all \\(reply\\): v2, the one with cents$`, "m"));
      expect(woke.split("\n")).toHaveLength(3); // summary, chatter, reply (its notification folded in)
      expect(woke).toContain("unrelated chatter"); // everything unread comes with it; nothing skipped
      const thread = await b.text("log_read", { thread: reply });
      expect(thread.split("\n")).toEqual([
        `thread of ${root}: 1 repl(ies)`,
        expect.stringMatching(new RegExp(`^${root} \\S+ → all: which ledger format\\?`)),
        `${reply} you → all re ${root}: v2, the one with cents`,
      ]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  }, 90_000);

  it("asks a human: the question goes to the human seats, the answer is a reply the asker's thread wait returns", async () => {
    const asker = await agent(system, acme.clients[2]!.token);
    const human = await agent(system, acme.clients[3]!.token);
    try {
      await asker.text("seat_attach", { cube_id: acme.cubeId });
      await human.text("seat_attach", { cube_id: acme.cubeId, role_id: humanRole });
      await asker.text("log_read");
      const question = position(await asker.text("log_post", { message: "may I drop the v1 table?", ask_human: true }));
      const waiting = asker.text("log_wait", { thread: question, timeout_s: 40 });
      const seen = await human.text("log_read");
      expect(seen).toMatch(new RegExp(`^${question} \\S+ → you \\[question\\]: may I drop the v1 table\\?`, "m"));
      await human.text("log_post", { message: "yes, after the backup", reply_to: question });
      expect(await waiting).toMatch(/^#\d+ operator-\d+ → all \(reply\): yes, after the backup$/m);
      const questions = await call<{ questions: { answer?: { message: string } }[] }>(
        system,
        "unimatrix.cube.v1.ActivityService/ListQuestions",
        { cubeId: acme.cubeId, includeAnswered: true },
        acme.user,
      );
      expect(questions.questions.some((q) => q.answer?.message === "yes, after the backup")).toBe(true);
    } finally {
      await Promise.all([asker.close(), human.close()]);
    }
  }, 90_000);

  it("claims with fences: claim, renew, release; a stale claim taken over with fence + 1", async () => {
    const issued = await call<{ client: { id: string }; token: string }>(
      system,
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name: "claim-holder" },
      acme.user,
    );
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: issued.client.id, cubeId: acme.cubeId, access: "CUBE_ACCESS_WRITE" },
      acme.user,
    );
    const [holder, other] = [await agent(system, issued.token), await agent(system, acme.clients[1]!.token)];
    try {
      const holderLabel = /you are (\S+)/.exec(await holder.text("seat_attach", { cube_id: acme.cubeId }))![1]!;
      await other.text("seat_attach", { cube_id: acme.cubeId });
      const task = position(await other.text("log_post", { message: "task: rebuild the index" }));
      const claimed = await holder.tool("log_claim", { entry_id: task });
      expect(claimed.content[0]!.text).toBe("claimed [claimed by you, fence 1]");
      expect(claimed.structuredContent).toEqual({ outcome: "claimed", fence: 1 });
      // The holder by its label (the README's promise), not by an id prefix.
      expect((await other.tool("log_claim", { entry_id: task })).content[0]!.text).toBe(
        `already_claimed [claimed by ${holderLabel}, fence 1]`,
      );
      expect(await holder.text("log_claim", { entry_id: task, action: "renew" })).toBe(
        "renewed [claimed by you, fence 1]",
      );
      // The original input still releases (an old caller never claims by mistake).
      expect(await holder.text("log_claim", { entry_id: task, release: true })).toBe("released");
      expect(await holder.text("log_claim", { entry_id: task })).toBe("claimed [claimed by you, fence 2]");
      // The holder's client is revoked: at the next liveness scan the claim is stale, and the other
      // drone (told by a notification) takes it over with fence + 1.
      expect(await other.text("log_claim", { entry_id: task, action: "take_over" })).toMatch(/^not_stale/);
      await call(system, "unimatrix.cube.v1.IdentityService/RevokeClient", { clientId: issued.client.id }, acme.user);
      await eventually(async () => {
        await (system.cube as unknown as RunningCube).livenessRound();
        return /stale claim of/.test(await other.text("log_read", { cursor: "" }));
      }, "the claim to turn stale");
      const read = await other.text("log_read", { cursor: "" });
      expect(read).toMatch(new RegExp(`^${task} .*\\[stale claim of \\S+, fence 2\\]$`, "m"));
      const taken = await other.tool("log_claim", { entry_id: task, action: "take_over" });
      expect(taken.content[0]!.text).toBe("taken_over [claimed by you, fence 3]");
      expect(taken.structuredContent).toEqual({ outcome: "taken_over", fence: 3 });
    } finally {
      await Promise.all([holder.close().catch(() => {}), other.close()]);
    }
  }, 90_000);

  it("receipts: delivered, read and acked as they happen; a quiet ack notifies no one", async () => {
    const [a, b] = [await agent(system, acme.clients[0]!.token), await agent(system, acme.clients[3]!.token)];
    try {
      await a.text("seat_attach", { cube_id: acme.cubeId });
      const bLabel = /you are (\S+)/.exec(await b.text("seat_attach", { cube_id: acme.cubeId }))![1]!;
      await b.text("log_read", { page_size: 500 });
      const entry = position(await a.text("log_post", { message: "please check #1", recipients: [bLabel] }));
      const receipts = () => a.text("receipts", { entry_id: entry });
      expect(await receipts()).toMatch(new RegExp(`^${bLabel}: .*not read, not acked$`));
      await b.text("log_read");
      await eventually(async () => /, read \S+, not acked$/.test(await receipts()), "the read receipt");
      // Receipt times to the second.
      expect(await receipts()).toMatch(/, read \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, not acked$/);
      const acks = () => a.pushed.filter((line) => /^#\d+ ack by /.test(line)).length;
      const before = acks();
      expect(await b.text("log_ack", { entry_id: entry, quiet: true })).toBe("acked");
      await eventually(async () => /, acked \S+$/.test(await receipts()), "the ack receipt");
      const structured = (await a.tool("receipts", { entry_id: entry })).structuredContent;
      expect(structured).toEqual({ receipts: [expect.objectContaining({ read: true, acked: true })] });
      // A later broadcast by b reaches a's push after anything pushed before it: a barrier.
      await b.text("log_post", { message: "a later broadcast, so pushes before it have arrived" });
      await eventually(
        () => a.pushed.some((line) => line.endsWith("→ all: a later broadcast, so pushes before it have arrived")),
        "the later broadcast pushed to a",
      );
      expect(acks()).toBe(before);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  }, 90_000);

  it("seat state: a change is said once, drones_list shows it", async () => {
    const a = await agent(system, acme.clients[0]!.token);
    try {
      await a.text("seat_attach", { cube_id: acme.cubeId });
      expect(await a.text("seat_state", { state: "waiting", note: "on the review" })).toBe("now waiting");
      expect(await a.text("seat_state", { state: "waiting", note: "on the review" })).toBe("unchanged");
      expect(await a.text("drones_list")).toMatch(/^\S+ \(you\): .*waiting since \S+ \(on the review\)$/m);
      const bad = await a.tool("seat_state", { state: "sleeping" });
      expect(bad.isError).toBe(true);
    } finally {
      await a.close();
    }
  });

  it("a saved session_token of another client is SESSION_REJECTED saying why; drones_list since a direct entry not yours is NOT_FOUND", async () => {
    const [a, b, c] = [
      await agent(system, acme.clients[0]!.token),
      await agent(system, acme.clients[1]!.token),
      await agent(system, acme.clients[2]!.token),
    ];
    try {
      const attached = await a.tool("seat_attach", { cube_id: acme.cubeId });
      const saved = (attached.structuredContent as { session_token: string }).session_token;
      const rejected = await b.tool("seat_attach", { cube_id: acme.cubeId, session_token: saved });
      expect(rejected.isError).toBe(true);
      expect(rejected.content[0]!.text).toMatch(/^SESSION_REJECTED: this session_token does not continue a seat here/);
      expect(rejected.content[0]!.text).not.toMatch(/no longer valid/);
      const bLabel = /you are (\S+)/.exec(await b.text("seat_attach", { cube_id: acme.cubeId }))![1]!;
      await c.text("seat_attach", { cube_id: acme.cubeId });
      const posted = await a.tool("log_post", { message: "between a and b", recipients: [bLabel] });
      const { id } = posted.structuredContent as { id: string };
      const since = await c.tool("drones_list", { since: id });
      expect(since.isError).toBe(true);
      expect(since.content[0]!.text).toMatch(/NOT_FOUND/);
      expect((await b.tool("drones_list", { since: id })).isError).toBeFalsy();
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });
});
