import { Fleet, type Targets } from "./harness/fleet";
import { buildResult, type RunResult, summary } from "./harness/report";
import { Scenario } from "./harness/scenario";
import { linkedCounts, nonAlternating } from "./harness/truth";

/**
 * The fleet under steady load and no faults: two gateways, two cube and two presence replicas, one
 * device, each a real process; load through gRPC, Connect and MCP, links cycling; every stream kept
 * open. The gateways dial `ipv4:` lists of every replica (round robin, needs fleet-gw);
 * `FLEET_TARGETS=pinned` pins gateway A to the first replicas and B to the second, which plain
 * `host:port` settings allow (this suite passes so on main before the fleet work) — events still
 * cross replicas through the bus either way.
 */
const targets = (process.env.FLEET_TARGETS as Targets | undefined) ?? "balanced";

describe(`fleet: steady load, no faults (${targets} targets)`, () => {
  let fleet: Fleet;
  let scenario: Scenario;
  let result: RunResult;

  beforeAll(async () => {
    fleet = await Fleet.start({
      label: "steady",
      targets,
      env: {
        presence: {
          PRESENCE_LINK_HEARTBEAT_MS: "1000",
          PRESENCE_LINK_LEASE_MS: "3000",
          PRESENCE_RECONCILE_MS: "1000",
        },
      },
    });
    scenario = await Scenario.start(fleet, "sticky");
    await scenario.progress(150, 24, "steady load");
    await scenario.stopLoad();
    result = buildResult(scenario, await scenario.settle());
    process.stdout.write(`\n${result.lines.join("\n")}\n`);
  }, 240_000);

  afterAll(async () => {
    await scenario?.close();
    await fleet?.stop();
  }, 60_000);

  it("committed every acknowledged append", () => {
    expect(scenario.acked.length).toBeGreaterThanOrEqual(150);
    expect(result.ackedMissingFromLog).toEqual([]);
  });

  it("delivered the log exactly once, in order, on every gRPC, SSE and MCP stream", () => {
    expect(result.log.length).toBeGreaterThanOrEqual(scenario.acked.length);
    expect(summary(result.activity)).toEqual(Object.fromEntries(result.activity.map((r) => [r.name, "exact"])));
  });

  it("delivered every presence transition exactly once, in order, on every gRPC and SSE watch", () => {
    expect(result.transitions.length).toBeGreaterThanOrEqual(48);
    expect(summary(result.presence)).toEqual(Object.fromEntries(result.presence.map((r) => [r.name, "exact"])));
    expect(nonAlternating(result.transitions)).toEqual([]);
  });

  it("turned each acknowledged link into exactly one machine_linked transition", () => {
    const counts = linkedCounts(result.transitions);
    for (const [machine, stats] of scenario.links) {
      expect({ machine, linked: counts.get(machine) ?? 0 }).toEqual({ machine, linked: stats.links });
      expect(stats.unlinks).toBe(stats.links);
    }
  });

  it("answered every request and kept every stream without a break", () => {
    expect(fleet.ledger.requests.filter((r) => !r.ok)).toEqual([]);
    const streams = scenario.activity.concat(scenario.presence);
    expect(streams.map((r) => [r.name, r.errorEvents, r.breaks])).toEqual(streams.map((r) => [r.name, [], []]));
  });
});
