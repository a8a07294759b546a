// Retention rounds at scale and under interruption (issue 29 item 4), on Postgres with two
// replicas: every due cube once per round past a page, a stream passed by the floor in the middle
// of its catch-up (handler level, pulled by hand), and a round stopped between two steps.
import { create } from "@bufbuild/protobuf";
import { SubscribeActivityRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { parseToken } from "@unimatrix/service-kit/auth";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { asBearer } from "@unimatrix/service-kit/testing";
import { subscribeActivity } from "../src/live/subscribe";
import { resolveToken } from "../src/reads/credentials";
import { createCallContext } from "./call-context";
import { type Harness, newClient, newCube, newTenant, post, type Replica, startHarness } from "./harness";
import { fillCube, messagesAfter, mine, SETTINGS } from "./retention-world";

describe("retention rounds on Postgres (two replicas)", () => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 8));
  let h: Harness;
  let r2: Replica;
  beforeAll(async () => {
    h = await startHarness("cube_retention_rounds", { clock, cube: SETTINGS });
    r2 = await h.replica();
  });
  afterAll(async () => {
    await h.close();
  });

  it("visits every due cube once per round, past a page of 100 cubes", async () => {
    const t = await newTenant(h, "ret-many");
    const cubes: string[] = [];
    for (let i = 0; i < 105; i++) {
      const { cube } = await h.cube.createCube(
        { requestKey: crypto.randomUUID(), name: `c${i}`, directive: "" },
        asBearer(t.userToken),
      );
      const cubeId = cube?.id as string;
      await h.cube.updateCube({ cubeId, retention: { maxItems: 1 } }, asBearer(t.userToken));
      for (const m of ["a", "b"]) await post(h, t.userToken, cubeId, m);
      cubes.push(cubeId);
    }
    // Whichever replica holds the lease now does it all.
    const rounds = await Promise.all([h.service.retentionRound(), r2.service.retentionRound()]);
    expect(rounds.filter((r) => r.held)).toHaveLength(1);
    const ours = rounds.flatMap((r) => r.cubes).filter((c) => cubes.includes(c.cubeId));
    expect(ours).toHaveLength(105);
    expect(ours.every((c) => c.floor === 1n && c.entries === 1)).toBe(true);
  }, 60_000);

  it("a stream still catching up when the floor passes it gets reset{floor} mid-stream, and no item twice or out of order", async () => {
    // Handler level (no socket): the stream is pulled by hand, so retention runs between its pages.
    const t = await newTenant(h, "ret-race");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId } = await newCube(h, owner.token);
    await fillCube(h, cubeId, 1200, clock.now());
    const deps = h.service.deps;
    const resolved = await resolveToken(deps, parseToken(t.userToken)!);
    const controller = new AbortController();
    const events = subscribeActivity(deps, h.service.feed)(
      create(SubscribeActivityRequestSchema, { cubeId, after: "" }),
      createCallContext({ principal: resolved!.principal, logger: deps.logger, signal: controller.signal }),
    );
    const seen: string[] = [];
    const pull = async () => {
      const { value } = await events.next();
      const event = value?.event;
      seen.push(
        event?.case === "entry"
          ? String(event.value.message)
          : event?.case === "reset"
            ? `reset:${event.value.cursor}`
            : String(event?.case),
      );
    };
    for (let i = 0; i < 500; i++) await pull(); // the first page of the catch-up
    // Retention passes the stream: keep the newest 300 positions (floor 900).
    await h.cube.updateCube({ cubeId, retention: { maxItems: 300 } }, asBearer(t.userToken));
    const rounds = await Promise.all([h.service.retentionRound(), r2.service.retentionRound()]);
    expect(rounds.flatMap((r) => mine(r, cubeId))).toEqual([expect.objectContaining({ floor: 900n, entries: 900 })]);
    while (seen.at(-1) !== "ready") await pull();
    controller.abort();
    await events.return(undefined);
    const { cube } = await h.cube.getCube({ cubeId }, asBearer(t.userToken));
    const expected = [
      ...Array.from({ length: 500 }, (_, i) => `m${i + 1}`),
      `reset:${cube?.floorCursor}`,
      ...Array.from({ length: 300 }, (_, i) => `m${i + 901}`),
      "ready",
    ];
    expect(seen).toEqual(expected);
  });

  it("a round told to stop ends after a step: the floor stays where everything under it is gone, the next round goes on", async () => {
    const t = await newTenant(h, "ret-stop");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId } = await newCube(h, owner.token);
    await fillCube(h, cubeId, 200, clock.now());
    await h.cube.updateCube({ cubeId, retention: { maxItems: 10 } }, asBearer(t.userToken));
    // Steps of 20 batches of 3 = 60 positions. The signal reads "stopping" from its third look on:
    // the round's start, the first step's check (go), then the second step's (stop).
    let looks = 0;
    const stopping = {
      get aborted() {
        looks += 1;
        return looks > 2;
      },
    } as AbortSignal;
    clock.advance(61_000); // any previous holder's lease has expired
    const cut = await h.service.retentionRound(stopping);
    expect(mine(cut, cubeId)).toEqual([expect.objectContaining({ floor: 60n, entries: 60 })]);
    expect((await messagesAfter({ r: h, clock }, t.userToken, cubeId, "")).slice(0, 2)).toEqual(["m61", "m62"]);
    const rest = await h.service.retentionRound();
    expect(mine(rest, cubeId)).toEqual([expect.objectContaining({ floor: 190n, entries: 130 })]);
    expect(await messagesAfter({ r: h, clock }, t.userToken, cubeId, "")).toHaveLength(10);
  });
});
