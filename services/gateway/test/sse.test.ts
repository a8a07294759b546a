import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { RunningCube } from "@unimatrix/cube";
import { createClient } from "@unimatrix/service-kit/grpc";
import { eventually } from "@unimatrix/service-kit/testing";
import { EventSource } from "eventsource";
import { call, type System, seedTenant, startSystem } from "./system";

interface Received {
  readonly type: string;
  readonly id: string;
  readonly data: Record<string, unknown>;
}

/** An EventSource (the `eventsource` package, as a browser would use it) with a bearer token. */
function listen(url: string, token: string, lastEventId?: string) {
  const received: Received[] = [];
  const source = new EventSource(url, {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        headers: {
          ...(init?.headers as Record<string, string>),
          authorization: `Bearer ${token}`,
          ...(lastEventId ? { "last-event-id": lastEventId } : {}),
        },
      }),
  });
  for (const type of [
    "entry",
    "notification",
    "ready",
    "access_revoked",
    "reset",
    "machine_snapshot",
    "machine_linked",
    "machine_unlinked",
    "machine_ready",
  ]) {
    source.addEventListener(type, (event) => {
      received.push({ type, id: event.lastEventId, data: JSON.parse(event.data) as Record<string, unknown> });
    });
  }
  return { source, received };
}

describe("gateway: SSE", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let writer: string;
  let reader: string;

  beforeAll(async () => {
    system = await startSystem("gw_sse");
    acme = await seedTenant(system, "acme", 2);
    const attach = (token: string) =>
      call<{ sessionToken: string }>(
        system,
        "unimatrix.cube.v1.CubeService/AttachSeat",
        { cubeId: acme.cubeId, roleId: acme.roleId },
        token,
      );
    writer = (await attach(acme.clients[0]!.token)).sessionToken;
    reader = (await attach(acme.clients[1]!.token)).sessionToken;
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  const post = (message: string) =>
    call(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      { cubeId: acme.cubeId, message, visibility: "VISIBILITY_BROADCAST" },
      writer,
    );
  const messages = (received: Received[]) =>
    received.filter((r) => r.type === "entry").map((r) => String(r.data.message));

  it("streams entries with cursors as ids, and resumes from Last-Event-ID with no gap and no duplicate", async () => {
    const url = `${system.url}/v1/cubes/${acme.cubeId}/events`;
    const first = listen(url, reader);
    await eventually(() => first.received.some((r) => r.type === "ready"), "ready");
    for (let i = 1; i <= 5; i++) await post(`m${i}`);
    await eventually(() => messages(first.received).length === 5, "five entries");
    first.source.close();
    const entries = first.received.filter((r) => r.type === "entry");
    expect(entries.every((e) => e.id === (e.data as { cursor: string }).cursor && e.id !== "")).toBe(true);
    // The data is the message's JSON as the Connect face writes it: fields at their defaults too.
    expect(entries[0]!.data).toMatchObject({ ackCount: 0, replyCount: 0, question: false, recipientDroneIds: [] });
    const lastId = entries.at(-1)!.id;

    for (let i = 6; i <= 10; i++) await post(`m${i}`);
    const second = listen(url, reader, lastId);
    await eventually(() => messages(second.received).length >= 5, "the five missed entries");
    await post("m11");
    await eventually(() => messages(second.received).includes("m11"), "a live entry after the replay");
    second.source.close();
    expect(messages(second.received)).toEqual(["m6", "m7", "m8", "m9", "m10", "m11"]);
  });

  it("accepts ?after= as the cursor too", async () => {
    const all = await call<{ items: { entry?: { cursor: string; message: string } }[] }>(
      system,
      "unimatrix.cube.v1.ActivityService/ReadActivity",
      { cubeId: acme.cubeId, pageSize: 500 },
      acme.user,
    );
    const entries = all.items.flatMap((item) => (item.entry ? [item.entry] : []));
    const m9 = entries.find((e) => e.message === "m9")!;
    const resumed = listen(
      `${system.url}/v1/cubes/${acme.cubeId}/events?after=${encodeURIComponent(m9.cursor)}`,
      reader,
    );
    await eventually(() => messages(resumed.received).includes("m11"), "replay to the head");
    resumed.source.close();
    expect(messages(resumed.received)).toEqual(["m10", "m11"]);
  });

  it("refuses a stream without a token with 401 and Connect error JSON", async () => {
    const response = await fetch(`${system.url}/v1/cubes/${acme.cubeId}/events`);
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ code: "unauthenticated" });
  });

  it("ends a revoked client's stream with a final access_revoked event", async () => {
    const doomed = await call<{ client: { id: string }; token: string }>(
      system,
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name: "doomed" },
      acme.user,
    );
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: doomed.client.id, cubeId: acme.cubeId, access: "CUBE_ACCESS_READ" },
      acme.user,
    );
    const stream = listen(`${system.url}/v1/cubes/${acme.cubeId}/events`, doomed.token);
    let closedByServer = false;
    stream.source.addEventListener("access_revoked", () => {
      closedByServer = true;
      stream.source.close();
    });
    await eventually(() => stream.received.some((r) => r.type === "ready"), "ready");
    await call(system, "unimatrix.cube.v1.IdentityService/RevokeClient", { clientId: doomed.client.id }, acme.user);
    // A post makes the stream drain, and each drain re-checks access.
    await eventually(
      async () => {
        await post("after revoke");
        return closedByServer;
      },
      "access_revoked",
      15_000,
    );
    expect(stream.received.at(-1)?.type).toBe("access_revoked");
  }, 30_000);

  it("streams the machines watch: snapshot, then link and unlink with cursors", async () => {
    const machine = await call<{ machine: { id: string }; token: string }>(
      system,
      "unimatrix.presence.v1.MachineService/RegisterMachine",
      { name: "build-01" },
      acme.user,
    );
    const watch = listen(`${system.url}/v1/machines/events`, acme.user);
    await eventually(() => watch.received.some((r) => r.type === "machine_ready"), "machine_ready");
    expect(watch.received[0]?.type).toBe("machine_snapshot");
    const links = createClient(LinkService, `127.0.0.1:${system.presence.port}`);
    const link = links.link({ metadata: { authorization: `Bearer ${machine.token}` } });
    link.call.on("error", () => {});
    link.send({ event: { case: "hello", value: { agentVersion: "test", hostname: "build-01" } } });
    await eventually(() => watch.received.some((r) => r.type === "machine_linked"), "machine_linked");
    link.cancel();
    await eventually(() => watch.received.some((r) => r.type === "machine_unlinked"), "machine_unlinked");
    watch.source.close();
    links.close();
    const transitions = watch.received.filter((r) => r.type === "machine_linked" || r.type === "machine_unlinked");
    expect(transitions.map((t) => [t.type, t.data.machineId])).toEqual([
      ["machine_linked", machine.machine.id],
      ["machine_unlinked", machine.machine.id],
    ]);
    expect(Number(transitions[1]!.id)).toBeGreaterThan(Number(transitions[0]!.id));
  });

  it("answers a Last-Event-ID below the retained floor with a reset event (id = the floor), then every entry after it once", async () => {
    // Keep the newest 3 positions of this cube, post, and let the retention job prune.
    await call(
      system,
      "unimatrix.cube.v1.CubeService/UpdateCube",
      { cubeId: acme.cubeId, retention: { maxItems: 3 } },
      acme.user,
    );
    await post("r1");
    const head = await call<{ items: { entry?: { cursor: string; message: string } }[] }>(
      system,
      "unimatrix.cube.v1.ActivityService/ReadActivity",
      { cubeId: acme.cubeId, pageSize: 500 },
      acme.user,
    );
    const r1 = head.items.flatMap((i) => (i.entry ? [i.entry] : [])).find((e) => e.message === "r1")!;
    for (const m of ["r2", "r3", "r4", "r5"]) await post(m);
    const round = await (system.cube as RunningCube).retentionRound();
    expect(round.held).toBe(true);
    const { cube } = await call<{ cube: { floorCursor: string } }>(
      system,
      "unimatrix.cube.v1.CubeService/GetCube",
      { cubeId: acme.cubeId },
      acme.user,
    );
    expect(cube.floorCursor).not.toBe("");

    const resumed = listen(`${system.url}/v1/cubes/${acme.cubeId}/events`, reader, r1.cursor);
    await eventually(() => resumed.received.some((r) => r.type === "ready"), "ready");
    await post("r6");
    await eventually(() => messages(resumed.received).includes("r6"), "a live entry after the reset");
    resumed.source.close();
    expect(resumed.received[0]).toMatchObject({
      type: "reset",
      id: cube.floorCursor,
      data: { cursor: cube.floorCursor },
    });
    expect(messages(resumed.received)).toEqual(["r3", "r4", "r5", "r6"]);
  });
});
