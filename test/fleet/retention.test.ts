import { status } from "@grpc/grpc-js";
import { toStatus } from "@unimatrix/service-kit/grpc";
import { readSseFrames } from "@unimatrix/service-kit/testing";
import { Fleet } from "./harness/fleet";
import { activityClient, bearer } from "./harness/grpc";
import { LogTap } from "./harness/log-tap";
import { type FleetProcess, poll } from "./harness/processes";
import { buildResult, type RunResult, summary } from "./harness/report";
import { Scenario } from "./harness/scenario";
import { readLog } from "./harness/truth";

/** Positions a cube keeps behind its head in this run: a few seconds of the load. */
const KEEP = 120;

/** A counter of a process's /metrics, summed over the label sets matching `labels` (0 when absent). */
async function counter(proc: FleetProcess, name: string, labels = ""): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${proc.metricsPort}/metrics`)).text();
  return text
    .split("\n")
    .filter((line) => line.startsWith(`${name}{`) && line.includes(labels))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}

/**
 * Retention under load on a fleet (issue 29 item 4): the cube keeps its newest 120 positions, and
 * the retention job prunes every half second while every surface appends and every stream follows.
 * The holder of the job's lease is drained (SIGTERM) mid-run and the other replica takes the job
 * over at once. Since the log is pruned as it grows, the truth is read from Postgres all along (a
 * `LogTap`), and every stream must still deliver it exactly once, in order. Afterwards an old
 * cursor is below the floor: ReadActivity answers FAILED_PRECONDITION, a gRPC stream and SSE
 * start with `reset` at the floor and go on with exactly the retained log; a held claim on a
 * pruned stretch is kept.
 */
describe("fleet: retention prunes under load, on one replica at a time", () => {
  let fleet: Fleet;
  let scenario: Scenario;
  let result: RunResult;
  let tap: LogTap;
  const held = { before: [0, 0], after: [0, 0] };
  let holder = -1;
  let claimed = "";

  const call = async <T>(path: string, body: unknown, token: string): Promise<T> => {
    const response = await fetch(`${fleet.gatewayUrls()[1]}/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    if (response.status !== 200) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  };
  const heldRounds = () =>
    Promise.all(fleet.cube.map((c) => counter(c, "unimatrix_cube_retention_rounds_total", 'outcome="held"')));

  beforeAll(async () => {
    fleet = await Fleet.start({
      label: "retention",
      targets: "balanced",
      env: {
        cube: { CUBE_RETENTION_INTERVAL_MS: "500" },
        presence: { PRESENCE_LINK_HEARTBEAT_MS: "1000", PRESENCE_LINK_LEASE_MS: "3000", PRESENCE_RECONCILE_MS: "1000" },
      },
    });
    scenario = await Scenario.start(fleet, "sticky", 9);
    const { world } = scenario;
    const reader = world.clients[4]!.token;
    tap = new LogTap(activityClient(Fleet.target(fleet.cube)), reader, world.cubeId, scenario.genesis);
    // A claim held from the start: its entry is soon far below the floor, and kept.
    const seat = await call<{ sessionToken: string }>(
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: world.cubeId, roleId: world.roleId, hostname: "holder" },
      world.clients[8]!.token,
    );
    const entry = await call<{ entry: { id: string } }>(
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      { cubeId: world.cubeId, message: "claimed for the whole run", visibility: "VISIBILITY_BROADCAST" },
      seat.sessionToken,
    );
    claimed = entry.entry.id;
    await call(
      "unimatrix.cube.v1.ActivityService/ClaimEntry",
      { cubeId: world.cubeId, entryId: claimed },
      seat.sessionToken,
    );
    await call(
      "unimatrix.cube.v1.CubeService/UpdateCube",
      { cubeId: world.cubeId, retention: { maxItems: KEEP } },
      world.userToken,
    );
    await scenario.progress(200, 8, "load while retention prunes");
    // The lease holder drains: it hands the lease over, and the other replica runs the next rounds.
    held.before = await heldRounds();
    holder = held.before[0]! >= held.before[1]! ? 0 : 1;
    await fleet.drain(fleet.cube[holder]!);
    await scenario.progress(150, 8, "load after the holder drained");
    held.after = await Promise.all(
      fleet.cube.map((c, i) =>
        i === holder ? 0 : counter(c, "unimatrix_cube_retention_rounds_total", 'outcome="held"'),
      ),
    );
    await scenario.stopLoad();
    result = buildResult(scenario, await scenario.settle(30_000, () => tap.finish()));
    process.stdout.write(`\n${result.lines.join("\n")}\n`);
  }, 300_000);

  afterAll(async () => {
    await scenario?.close();
    await fleet?.stop();
  }, 60_000);

  it("pruned while it ran: the retained log is the newest stretch of what was tapped, and the tap never fell below the floor", async () => {
    expect(tap.failures).toEqual([]);
    const { world } = scenario;
    const retained = await readLog(activityClient(Fleet.target(fleet.cube)), world.clients[4]!.token, world.cubeId, "");
    const tapped = result.log;
    expect(tapped.length).toBeGreaterThan(KEEP * 2);
    expect(retained.length).toBeLessThan(tapped.length / 2);
    expect(retained.map((e) => e.id)).toEqual(tapped.slice(tapped.length - retained.length));
  });

  it("committed every acknowledged append and delivered the log exactly once, in order, on every stream", () => {
    expect(result.ackedMissingFromLog).toEqual([]);
    expect(summary(result.activity)).toEqual(Object.fromEntries(result.activity.map((r) => [r.name, "exact"])));
    expect(fleet.ledger.unexcused()).toEqual([]);
  });

  it("ran the job on one replica at a time, and the other took it over when the holder drained", () => {
    const other = 1 - holder;
    // Before the drain, one replica held every round (the other tried and was skipped).
    expect(held.before[holder]).toBeGreaterThan(0);
    expect(held.before[other]).toBe(0);
    expect(held.after[other]).toBeGreaterThan(0);
  });

  it("answers an old cursor with the floor: FAILED_PRECONDITION on ReadActivity, `reset` on gRPC and SSE, then the retained log", async () => {
    const { world } = scenario;
    const token = world.clients[4]!.token;
    const client = activityClient(Fleet.target(fleet.cube));
    const read = await client
      .readActivity({ cubeId: world.cubeId, cursor: scenario.genesis }, bearer(token, { deadline: 10_000 }))
      .then(
        () => status.OK,
        (error: unknown) => toStatus(error).code,
      );
    expect(read).toBe(status.FAILED_PRECONDITION);
    // The load has stopped, but under a busy machine the job may still be catching up with the
    // head: the floor is read once it held across two whole rounds of the job (the replica that
    // took it over), so the gRPC and SSE answers below are compared with the same floor.
    const floor = () =>
      call<{ cube: { floorCursor: string } }>(
        "unimatrix.cube.v1.CubeService/GetCube",
        { cubeId: world.cubeId },
        world.userToken,
      );
    const rounds = () => counter(fleet.cube[1 - holder]!, "unimatrix_cube_retention_rounds_total", 'outcome="held"');
    let cube = (await floor()).cube;
    for (let tries = 0; ; tries += 1) {
      if (tries === 20) throw new Error(`the floor still moved after ${tries} checks: ${cube.floorCursor}`);
      const from = await rounds();
      await poll(async () => (await rounds()) >= from + 2, "two more retention rounds", 20_000);
      const now = (await floor()).cube;
      if (now.floorCursor === cube.floorCursor) break;
      cube = now;
    }
    const retained = (await readLog(client, token, world.cubeId, "")).map((e) => e.id);

    const stop = new AbortController();
    const events: string[] = [];
    const stream = client.subscribeActivity(
      { cubeId: world.cubeId, after: scenario.genesis },
      bearer(token, { signal: stop.signal }),
    );
    for await (const { event } of stream) {
      if (event.case === "reset") events.push(`reset ${event.value.cursor}`);
      if (event.case === "entry") events.push(event.value.id);
      if (event.case === "ready") break;
    }
    stop.abort();
    expect(events).toEqual([`reset ${cube.floorCursor}`, ...retained]);

    const frames: string[] = [];
    const sse = new AbortController();
    const url = `${fleet.gatewayUrls()[1]}/v1/cubes/${world.cubeId}/events?after=${encodeURIComponent(scenario.genesis)}`;
    const reading = readSseFrames(url, token, sse.signal, (frame) => frames.push(frame)).catch(() => {});
    await poll(() => frames.some((f) => f.includes("event: ready")), "the SSE stream to catch up", 20_000);
    sse.abort();
    await reading;
    // The first event (after the stream's `retry:` advice): the reset, its id the floor.
    const first = frames.find((f) => f.includes("event:"))!;
    expect(first).toContain("event: reset");
    expect(first).toContain(`id: ${cube.floorCursor}`);
  });

  it("kept the claim held since the start, far below the floor, reachable by id", async () => {
    const { world } = scenario;
    const thread = await call<{ root: { id: string; message: string } }>(
      "unimatrix.cube.v1.ActivityService/ReadThread",
      { cubeId: world.cubeId, entryId: claimed },
      world.userToken,
    );
    expect(thread.root).toMatchObject({ id: claimed, message: "claimed for the whole run" });
    expect(result.log.indexOf(claimed)).toBeLessThan(result.log.length - KEEP);
  });
});
