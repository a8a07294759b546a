import { eventually } from "@unimatrix/service-kit/testing";
import { modernListen, modernPost, modernRpc } from "./mcp-2026";
import { addGateway, call, type System, seedTenant, startSystem } from "./system";

type Note = { method?: string; params?: Record<string, unknown>; result?: Record<string, unknown> };

/** A notification's task without the listen's `_meta` (what `tasks/get` answers, minus its result type). */
const taskOf = (note: Note) => {
  const { _meta, ...task } = note.params!;
  return task;
};

describe("gateway: MCP 2026-07-28 task notifications on subscriptions/listen", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let other: Awaited<ReturnType<typeof addGateway>>;

  beforeAll(async () => {
    system = await startSystem("gw_mcp_task_listen");
    acme = await seedTenant(system, "acme", 2);
    other = await addGateway(system);
  }, 120_000);
  afterAll(async () => {
    await other.stop();
    await system.stop();
  });

  it("notifies each task as tasks/get answers it, once per change, on a gateway that did not create it, and ends when all have settled", async () => {
    const rpc = modernRpc(acme.clients[0]!.token);
    const attached = await rpc(system.url, "tools/call", { name: "seat_attach", arguments: { cube_id: acme.cubeId } });
    const { session_token: seat, label } = attached.result!.structuredContent as {
      session_token: string;
      label: string;
    };
    await rpc(system.url, "tools/call", { name: "log_read", arguments: { seat } });
    const writer = (
      await call<{ sessionToken: string }>(
        system,
        "unimatrix.cube.v1.CubeService/AttachSeat",
        { cubeId: acme.cubeId, roleId: acme.roleId, hostname: "writer" },
        acme.clients[1]!.token,
      )
    ).sessionToken;
    const post = (message: string, recipientLabels: string[] = []) =>
      call<{ entry: { id: string } }>(
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
    const park = async (args: Record<string, unknown>) => {
      const parked = await rpc(system.url, "tools/call", { name: "log_wait", arguments: { seat, ...args } });
      expect(parked.result).toMatchObject({ resultType: "task", status: "working" });
      return parked.result!.taskId as string;
    };
    const direct = await park({ only: "direct", timeout_s: 50 });
    const short = await park({ timeout_s: 1 });
    // Another credential's task is as unknown as a made-up id: left out of the acknowledgement.
    const foreign = modernRpc(acme.clients[1]!.token);
    const theirs = (
      await foreign(system.url, "tools/call", { name: "log_wait", arguments: { seat: writer, only: "direct" } })
    ).result!.taskId as string;

    const listen = await modernListen(other.url, acme.clients[0]!.token, {
      notifications: { taskIds: [direct, short, "made-up", theirs] },
    });
    expect(listen.status).toBe(200);
    const tasks = () => listen.messages.filter((m) => m.method === "notifications/tasks").map(taskOf);
    // The short wait's deadline passes: it completes with nothing new, heard without polling.
    await eventually(() => tasks().some((t) => t.taskId === short && t.status === "completed"), "the short wait");
    // A broadcast is not what the direct-only wait is for: its state does not change, so no notification.
    await post("for everyone");
    const { entry: direct1 } = await post("for you alone", [label]);
    await listen.ended;

    expect(listen.messages[0]).toMatchObject({
      method: "notifications/subscriptions/acknowledged",
      params: { notifications: { taskIds: [direct, short] } },
    });
    expect(tasks().map((t) => [t.taskId, t.status])).toEqual([
      [direct, "working"],
      [short, "working"],
      [short, "completed"],
      [direct, "completed"],
    ]);
    expect(tasks()[2]!.result).toMatchObject({ content: [{ type: "text", text: "nothing new" }] });
    expect((tasks()[3]!.result as { content: { text: string }[] }).content[0]!.text).toMatch(
      /^#\d+ \S+ → you: for you alone\n\(log_read takes your inbox\)$/,
    );
    // Each notification is the task exactly as tasks/get answers it (here on the other gateway).
    for (const [taskId, heard] of [
      [short, tasks()[2]!],
      [direct, tasks()[3]!],
    ] as const) {
      // (less the result type and the `_meta` every answer of the SDK carries)
      const { resultType, _meta, ...polled } = (await rpc(system.url, "tasks/get", { taskId })).result!;
      expect(resultType).toBe("complete");
      expect(heard).toEqual(polled);
    }
    // Reading the task's state marked nothing read: the agent has not seen the direct yet.
    const { receipts } = await call<{ receipts: { readAt?: string; deliveredAt?: string }[] }>(
      system,
      "unimatrix.cube.v1.ActivityService/ListReceipts",
      { cubeId: acme.cubeId, entryId: direct1.id },
      writer,
    );
    expect(receipts).toHaveLength(1);
    expect(receipts[0]!.readAt).toBeUndefined();
    // Every task settled: the listen ended with its response.
    expect(listen.messages.at(-1)).toMatchObject({ id: 1, result: { resultType: "complete" } });
    expect(listen.messages).toHaveLength(6);
  });

  it("refuses task notifications to a client that did not declare the tasks extension, with -32021 naming it", async () => {
    const rpc = modernRpc(acme.clients[0]!.token);
    const attached = await rpc(system.url, "tools/call", { name: "seat_attach", arguments: { cube_id: acme.cubeId } });
    const seat = (attached.result!.structuredContent as { session_token: string }).session_token;
    const taskId = (await rpc(system.url, "tools/call", { name: "log_wait", arguments: { seat, timeout_s: 1 } }))
      .result!.taskId as string;
    const answer = await modernPost(
      other.url,
      "subscriptions/listen",
      { notifications: { taskIds: [taskId] } },
      acme.clients[0]!.token,
      7,
      { tasks: false },
    );
    expect(answer.status).toBe(400);
    expect(await answer.json()).toEqual({
      jsonrpc: "2.0",
      id: 7,
      error: {
        code: -32021,
        message: "Missing required client capability",
        data: { requiredCapabilities: { extensions: { "io.modelcontextprotocol/tasks": {} } } },
      },
    });
    // A malformed list names its field.
    const bad = await modernPost(
      other.url,
      "subscriptions/listen",
      { notifications: { taskIds: [42] } },
      acme.clients[0]!.token,
      8,
    );
    expect(await bad.json()).toMatchObject({
      id: 8,
      error: { code: -32602, message: expect.stringContaining("notifications.taskIds") },
    });
  });

  it("ends a task listen with its response when its bearer is rotated; the next listen answers 401", async () => {
    const team = await seedTenant(system, "rotated", 1);
    const client = team.clients[0]!;
    const rpc = modernRpc(client.token);
    const attached = await rpc(system.url, "tools/call", { name: "seat_attach", arguments: { cube_id: team.cubeId } });
    const seat = (attached.result!.structuredContent as { session_token: string }).session_token;
    const taskId = (
      await rpc(system.url, "tools/call", { name: "log_wait", arguments: { seat, only: "direct", timeout_s: 50 } })
    ).result!.taskId as string;
    const listen = await modernListen(other.url, client.token, { notifications: { taskIds: [taskId] } });
    await eventually(() => listen.messages.some((m) => m.method === "notifications/tasks"), "the task's first state");
    await call(system, "unimatrix.cube.v1.IdentityService/RotateClientCredential", { clientId: client.id }, team.user);
    await listen.ended;
    expect(listen.messages.map((m) => m.method ?? "response")).toEqual([
      "notifications/subscriptions/acknowledged",
      "notifications/tasks",
      "response",
    ]);
    const again = await modernPost(
      other.url,
      "subscriptions/listen",
      { notifications: { taskIds: [taskId] } },
      client.token,
      2,
    );
    expect(again.status).toBe(401);
  });
});
