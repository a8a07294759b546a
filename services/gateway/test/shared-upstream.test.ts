import { eventually } from "@unimatrix/service-kit/testing";
import { EventSource } from "eventsource";
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

describe("gateway: SSE streams share one upstream subscription per (cube, credential)", () => {
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
    await new Promise((resolve) => setTimeout(resolve, 200)); // a duplicate would land here
    for (const s of [a, b, c]) expect(s.entries()).toEqual(sent);
    expect(late.entries()).toEqual(sent.slice(10));
    // The late joiner's ready is a resumable position: its id resumes after s9.
    const lateReady = late.received.find((r) => r.type === "ready")!;
    const lastOfFirstTen = a.received.filter((r) => r.type === "entry")[9]!.id;
    expect(lateReady.id).toBe(lastOfFirstTen);

    // Another credential reads its own upstream; a stream resuming from a cursor does not share.
    const other = listen(url(), acme.clients[2]!.token);
    await eventually(() => other.ready(), "the other credential's ready");
    expect(await shared()).toEqual({ upstreams: 2, members: 5 });
    const resumed = listen(url(), reader, lastOfFirstTen);
    await eventually(() => resumed.entries().length === 10, "the resumed stream's replay");
    expect(resumed.entries()).toEqual(sent.slice(10));
    expect(await shared()).toEqual({ upstreams: 2, members: 5 });

    for (const s of [a, b, c, late, other, resumed]) s.source.close();
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
});
