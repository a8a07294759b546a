import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { eventually } from "@unimatrix/service-kit/testing";
import { EventSource } from "eventsource";
import { entryMessage } from "./pushed";
import { call, type System, seedTenant, startSystem } from "./system";

interface Received {
  readonly type: string;
  readonly id: string;
  readonly data: Record<string, unknown>;
}

/** An EventSource with a bearer token (and optionally a Last-Event-ID), recording what it receives. */
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
  for (const type of ["entry", "ready", "access_revoked", "closed"]) {
    source.addEventListener(type, (event) => {
      received.push({ type, id: event.lastEventId, data: JSON.parse(event.data) as Record<string, unknown> });
    });
  }
  const entries = () => received.filter((r) => r.type === "entry").map((r) => String(r.data.message));
  const ready = () => received.some((r) => r.type === "ready");
  return { source, received, entries, ready };
}

describe("gateway: SSE streams share one upstream subscription per (cube, viewer class)", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let writer: string;

  beforeAll(async () => {
    system = await startSystem("gw_shared");
    acme = await seedTenant(system, "acme", 3);
    writer = (
      await call<{ sessionToken: string }>(
        system,
        "unimatrix.cube.v1.CubeService/AttachSeat",
        { cubeId: acme.cubeId, roleId: acme.roleId },
        acme.clients[0]!.token,
      )
    ).sessionToken;
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
  const shared = async () => {
    const values = (await system.gateway.metrics.sharedUpstreams.get()).values;
    const of = (kind: string) => values.find((v) => v.labels.kind === kind)?.value ?? -1;
    return { upstreams: of("upstreams"), members: of("members") };
  };
  const url = () => `${system.url}/v1/cubes/${acme.cubeId}/events`;
  /**
   * Posts a barrier entry and waits until it is the last thing on every stream: streams deliver in
   * order, so anything sent before it (a duplicate, say) has arrived by then. No sleep hopes.
   */
  const barrier = async (name: string, streams: readonly { entries(): string[] }[]) => {
    await post(name);
    await eventually(() => streams.every((s) => s.entries().at(-1) === name), `${name} last on every stream`);
  };
  const unbarred = (entries: string[]) => entries.filter((e) => !e.startsWith("barrier"));

  it("streams of one credential read one upstream; each gets every entry once, in order; a late joiner starts at its ready", async () => {
    const reader = acme.clients[1]!.token;
    const a = listen(url(), reader);
    const b = listen(url(), reader);
    const c = listen(url(), reader);
    await eventually(() => a.ready() && b.ready() && c.ready(), "three ready");
    expect(await shared()).toEqual({ upstreams: 1, members: 3 });

    const sent = Array.from({ length: 20 }, (_, i) => `s${i}`);
    for (const m of sent.slice(0, 10)) await post(m);
    await eventually(() => a.entries().length === 10, "the first ten on a");
    const late = listen(url(), reader);
    await eventually(() => late.ready(), "the late joiner's ready");
    expect(await shared()).toEqual({ upstreams: 1, members: 4 });
    for (const m of sent.slice(10)) await post(m);
    await eventually(
      () => [a, b, c].every((s) => s.entries().length === 20) && late.entries().length === 10,
      "every entry on every stream",
    );
    await barrier("barrier-1", [a, b, c, late]);
    for (const s of [a, b, c]) expect(unbarred(s.entries())).toEqual(sent);
    expect(unbarred(late.entries())).toEqual(sent.slice(10));
    // The late joiner's ready is a resumable position: its id resumes after s9.
    const lateReady = late.received.find((r) => r.type === "ready")!;
    const lastOfFirstTen = a.received.filter((r) => r.type === "entry")[9]!.id;
    expect(lateReady.id).toBe(lastOfFirstTen);

    // Another credential of the tenant sees the same and joins after its own check; a drone
    // session sees what its drone sees and reads its own; a stream resuming from a cursor does not share.
    const other = listen(url(), acme.clients[2]!.token);
    await eventually(() => other.ready(), "the other credential's ready");
    expect(await shared()).toEqual({ upstreams: 1, members: 5 });
    const drone = listen(url(), writer);
    await eventually(() => drone.ready(), "the drone's ready");
    expect(await shared()).toEqual({ upstreams: 2, members: 6 });
    const resumed = listen(url(), reader, lastOfFirstTen);
    await eventually(() => resumed.entries().length === 11, "the resumed stream's replay");
    expect(resumed.entries()).toEqual([...sent.slice(10), "barrier-1"]);
    expect(await shared()).toEqual({ upstreams: 2, members: 6 });

    for (const s of [a, b, c, late, other, drone, resumed]) s.source.close();
    await eventually(
      async () => (await shared()).upstreams === 0,
      "the shared upstreams closed with their last reader",
    );
  });

  it("a revoked credential's shared streams all end with access_revoked", async () => {
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
    const streams = [listen(url(), doomed.token), listen(url(), doomed.token)];
    for (const s of streams)
      s.source.addEventListener("access_revoked", () => {
        s.source.close();
      });
    await eventually(() => streams.every((s) => s.ready()), "both ready");
    expect((await shared()).upstreams).toBe(1);
    await call(system, "unimatrix.cube.v1.IdentityService/RevokeClient", { clientId: doomed.client.id }, acme.user);
    await eventually(
      () => streams.every((s) => s.received.some((r) => r.type === "access_revoked")),
      "access_revoked on both streams",
    );
    await eventually(async () => (await shared()).upstreams === 0, "the upstream closed");
  });

  it("readers of several credentials share one upstream; each loses it alone, the rest read on with nothing lost", async () => {
    const issue = async (name: string, access?: string) => {
      const c = await call<{ client: { id: string }; token: string }>(
        system,
        "unimatrix.cube.v1.IdentityService/IssueClient",
        { name },
        acme.user,
      );
      if (access)
        await call(
          system,
          "unimatrix.cube.v1.IdentityService/SetCubeGrant",
          { clientId: c.client.id, cubeId: acme.cubeId, access },
          acme.user,
        );
      return { id: c.client.id, token: c.token };
    };
    const [first, second, third, stranger] = [
      await issue("first", "CUBE_ACCESS_READ"),
      await issue("second", "CUBE_ACCESS_READ"),
      await issue("third", "CUBE_ACCESS_READ"),
      await issue("stranger"),
    ];
    const a = listen(url(), first.token);
    await eventually(() => a.ready(), "the first reader's ready");
    const b = listen(url(), second.token);
    const c = listen(url(), third.token);
    await eventually(() => b.ready() && c.ready(), "the others' ready");
    expect(await shared()).toEqual({ upstreams: 1, members: 3 });

    // A credential with no grant is refused for itself (Connect error JSON), and nobody else notices.
    const refused = await fetch(url(), { headers: { authorization: `Bearer ${stranger.token}` } });
    expect(refused.status).toBe(404);
    expect(((await refused.json()) as { code: string }).code).toBe("not_found");
    expect(await shared()).toEqual({ upstreams: 1, members: 3 });

    const sent = Array.from({ length: 30 }, (_, i) => `m${i}`);
    for (const m of sent.slice(0, 10)) await post(m);
    await eventually(() => [a, b, c].every((s) => s.entries().length === 10), "ten on every reader");

    // The third's grant is taken away: it alone is told, at once (the upstream's access news).
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/RevokeCubeGrant",
      { clientId: third.id, cubeId: acme.cubeId },
      acme.user,
    );
    await eventually(() => c.received.some((r) => r.type === "access_revoked"), "access_revoked on the third", 3_000);
    c.source.close();
    for (const m of sent.slice(10, 20)) await post(m);

    // The first — the one the upstream reads as — is revoked: it alone is told; the second reads
    // on as itself from where the upstream was, with nothing lost or repeated.
    await call(system, "unimatrix.cube.v1.IdentityService/RevokeClient", { clientId: first.id }, acme.user);
    await eventually(() => a.received.some((r) => r.type === "access_revoked"), "access_revoked on the first", 3_000);
    a.source.close();
    for (const m of sent.slice(20)) await post(m);
    await eventually(() => b.entries().length === 30, "every entry on the second");
    await barrier("barrier-2", [b]);
    expect(unbarred(b.entries())).toEqual(sent);
    expect(b.received.some((r) => r.type === "access_revoked")).toBe(false);
    expect(c.entries()).toEqual(sent.slice(0, 10));
    expect(a.entries()).toEqual(sent.slice(0, a.entries().length));
    expect(await shared()).toEqual({ upstreams: 1, members: 1 });
    b.source.close();
    await eventually(async () => (await shared()).upstreams === 0, "the upstream closed");
  });

  it("an MCP push from the head shares its drone's upstream with the drone's SSE readers; each gets every entry once", async () => {
    const client = new Client({ name: "sharing-agent", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${system.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${acme.clients[2]!.token}` } },
    });
    await client.connect(transport);
    try {
      const attached = (await client.callTool({
        name: "seat_attach",
        arguments: { cube_id: acme.cubeId, role_id: acme.roleId },
      })) as { content: { text: string }[] };
      const sessionToken = /session_token \(keep it to resume this seat\): (\S+)/.exec(attached.content[0]!.text)?.[1];
      expect(sessionToken).toMatch(/^umx_drone_/);
      // A second push stream of the seated session, opened without Last-Event-ID: it starts at the head.
      const pushed: string[] = [];
      const pushStream = new EventSource(`${system.url}/mcp`, {
        fetch: (input, init) =>
          fetch(input, {
            ...init,
            headers: {
              ...(init?.headers as Record<string, string>),
              authorization: `Bearer ${acme.clients[2]!.token}`,
              "mcp-session-id": transport.sessionId!,
            },
          }),
      });
      pushStream.onmessage = (event) => {
        const message = entryMessage((JSON.parse(event.data) as { params: { data: unknown } }).params.data);
        if (message !== undefined) pushed.push(message);
      };
      await eventually(async () => (await shared()).members === 1, "the push joined a shared upstream");
      const view = listen(url(), sessionToken!);
      await eventually(() => view.ready(), "the drone's SSE ready");
      expect(await shared()).toEqual({ upstreams: 1, members: 2 });
      const sent = ["p0", "p1", "p2"];
      for (const m of sent) await post(m);
      await eventually(() => pushed.length === 3 && view.entries().length === 3, "every entry on both");
      await barrier("barrier-3", [{ entries: () => pushed }, view]);
      expect(unbarred(pushed)).toEqual(sent);
      expect(unbarred(view.entries())).toEqual(sent);
      pushStream.close();
      view.source.close();
      await eventually(async () => (await shared()).upstreams === 0, "the upstream closed");
    } finally {
      await client.close();
    }
  });
});
