import { Fleet, type Targets } from "./harness/fleet";
import { type DrainRecord, poll } from "./harness/processes";
import { buildResult, type RunResult, summary } from "./harness/report";
import { type McpSpread, Scenario } from "./harness/scenario";
import type { SequenceReport, StreamRecord } from "./harness/streams";
import { nonAlternating } from "./harness/truth";

/**
 * The fleet's proof: under steady load through every surface, SIGKILL a cube replica (and start it
 * again), a presence replica and a gateway, cut Redis for a few seconds (starting the killed
 * presence replica again while it is down), then SIGTERM the other cube and presence replicas (each
 * drains), then check that every acknowledged append and every transition reached every resumed
 * stream exactly once, in order, and that nothing answered 5xx but requests in flight on a killed
 * process. Each check names the work it depends on: [today] held before the fleet work;
 * [fleet-gw] needs the gateway work (any gRPC target with round robin, SSE/MCP push re-subscribing
 * from the last cursor, MCP sessions in Redis); [fleet-svc] needs the service work (Redis optional
 * at start, draining while the bus is down, SIGTERM drains with a typed going_away).
 * `FLEET_TARGETS=pinned FLEET_MCP=sticky` runs the same faults on a fleet today's settings accept.
 */
const targets = (process.env.FLEET_TARGETS as Targets | undefined) ?? "balanced";
const spread = (process.env.FLEET_MCP as McpSpread | undefined) ?? "cross";
/** How long Redis stays cut at least. */
const OUTAGE_MS = 6_000;
/** UMX_DRAIN_DELAY_MS of the services: how long a SIGTERMed replica answers NOT_SERVING while still serving. */
const DRAIN_MS = 2_000;

describe(`fleet: kills and a Redis outage under load (${targets} targets, ${spread} MCP)`, () => {
  let fleet: Fleet;
  let scenario: Scenario;
  let result: RunResult;
  const stalls: string[] = [];
  let restartDuringOutage: string | undefined = "not tried";
  let outage = { from: 0, to: 0 };
  const drains: DrainRecord[] = [];

  /** Waits for progress; a stall is recorded (and asserted below) instead of ending the run. */
  const progress = async (entries: number, links: number, what: string) => {
    try {
      await scenario.progress(entries, links, what, 30_000);
      fleet.note(`progress: ${what}`);
    } catch (error) {
      stalls.push((error as Error).message);
      fleet.note(`STALL: ${(error as Error).message}`);
    }
  };

  beforeAll(async () => {
    fleet = await Fleet.start({
      label: "chaos",
      targets,
      env: {
        cube: { UMX_DRAIN_DELAY_MS: String(DRAIN_MS) },
        presence: {
          UMX_DRAIN_DELAY_MS: String(DRAIN_MS),
          PRESENCE_LINK_HEARTBEAT_MS: "1000",
          PRESENCE_LINK_LEASE_MS: "3000",
          PRESENCE_RECONCILE_MS: "1000",
        },
      },
    });
    scenario = await Scenario.start(fleet, spread);
    const [cube1, presence1, gatewayA] = [fleet.cube[0]!, fleet.presence[0]!, fleet.gateways[0]!];
    await progress(40, 8, "warm-up");
    await fleet.kill(cube1);
    await progress(40, 8, "after cube-1 was killed");
    // Back before the outage, so that during it appends land on both cube replicas and a stream
    // on one replica can only learn of the other's entries by draining from the database.
    await fleet.restart(cube1).catch((error) => stalls.push(`cube-1 restart: ${error}`));
    await progress(40, 8, "after cube-1 came back");
    await fleet.kill(presence1);
    await progress(40, 8, "after presence-1 was killed");
    await fleet.kill(gatewayA);
    await progress(40, 8, "after gateway-A was killed");

    await fleet.proxy.cut();
    fleet.note("Redis cut");
    const cutAt = Date.now();
    const restarting = fleet.restart(presence1, 20_000).then(
      () => undefined,
      (error: Error) => error.message.split("\n")[0],
    );
    await progress(30, 4, "while Redis is cut");
    // The outage lasts OUTAGE_MS at least: that is its length, not a wait for something to happen.
    await poll(() => Date.now() - cutAt >= OUTAGE_MS, "the outage to last its length", OUTAGE_MS + 60_000, 100);
    restartDuringOutage = await restarting;
    await fleet.proxy.heal();
    fleet.note("Redis healed");
    outage = fleet.proxy.outages.at(-1)!;
    await progress(40, 8, "after Redis healed");
    if (!presence1.running)
      await fleet.restart(presence1).catch((error) => stalls.push(`presence-1 restart: ${error}`));
    await progress(40, 8, "after presence-1 came back");
    // Graceful stops: the other replica of each service drains under load.
    drains.push(await fleet.drain(fleet.cube[1]!));
    await progress(30, 4, "after cube-2 drained");
    drains.push(await fleet.drain(fleet.presence[1]!));
    await progress(30, 4, "after presence-2 drained");
    await scenario.stopLoad();
    result = buildResult(scenario, await scenario.settle());
    process.stdout.write(
      `\n${result.lines.join("\n")}\nstalls: ${stalls.length ? stalls.join("; ") : "none"}\npresence-1 restarted during the outage: ${restartDuringOutage ?? "ready"}\n`,
    );
  }, 300_000);

  afterAll(async () => {
    await scenario?.close();
    await fleet?.stop();
  }, 60_000);

  const exact = (reports: SequenceReport[]) => Object.fromEntries(reports.map((r) => [r.name, "exact"]));
  const of = (surface: string, reports: SequenceReport[], records: StreamRecord[]) =>
    reports.filter((_, i) => records[i]!.surface === surface);

  it("[today] committed every acknowledged append and kept the load going through every fault", () => {
    expect(result.ackedMissingFromLog).toEqual([]);
    expect(stalls).toEqual([]);
  });

  it("[today] gRPC SubscribeActivity streams resumed with their cursor: the log exactly once, in order", () => {
    expect(summary(of("grpc", result.activity, scenario.activity))).toEqual(
      exact(of("grpc", result.activity, scenario.activity)),
    );
  });

  it("[today] gRPC WatchMachines streams resumed with their cursor: every transition exactly once, in order", () => {
    expect(result.transitions.length).toBeGreaterThan(0);
    expect(summary(of("grpc", result.presence, scenario.presence))).toEqual(
      exact(of("grpc", result.presence, scenario.presence)),
    );
    expect(nonAlternating(result.transitions)).toEqual([]);
  });

  it("[fleet-gw] SSE activity streams (EventSource, Last-Event-ID) on both gateways: exactly once, in order, no error event", () => {
    const sse = scenario.activity.filter((r) => r.surface === "sse");
    expect(summary(of("sse", result.activity, scenario.activity))).toEqual(
      exact(of("sse", result.activity, scenario.activity)),
    );
    expect(sse.map((r) => [r.name, r.errorEvents])).toEqual(sse.map((r) => [r.name, []]));
  });

  it("[fleet-gw] SSE machine streams on both gateways: exactly once, in order, no error event", () => {
    const sse = scenario.presence.filter((r) => r.surface === "sse");
    expect(summary(of("sse", result.presence, scenario.presence))).toEqual(
      exact(of("sse", result.presence, scenario.presence)),
    );
    expect(sse.map((r) => [r.name, r.errorEvents])).toEqual(sse.map((r) => [r.name, []]));
  });

  it("[fleet-gw] MCP sessions (one initialized on A and continued on B, one moved to B when A died): every entry pushed exactly once, in order", () => {
    expect(summary(of("mcp", result.activity, scenario.activity))).toEqual(
      exact(of("mcp", result.activity, scenario.activity)),
    );
  });

  it("[fleet-gw][fleet-svc] no request failed except those in flight on a killed process", () => {
    expect(fleet.ledger.describe(fleet.ledger.unexcused(), fleet.startedAt)).toEqual([]);
  });

  it("[fleet-svc] a presence replica started while Redis was unreachable became ready", () => {
    expect(restartDuringOutage).toBeUndefined();
  });

  it("[fleet-svc][fleet-gw] every activity stream (MCP pushes too) kept delivering while Redis was down", () => {
    const during = (r: StreamRecord) => r.delivered.filter((d) => d.at > outage.from && d.at < outage.to).length;
    expect(outage.to - outage.from).toBeGreaterThanOrEqual(OUTAGE_MS);
    expect(scenario.activity.filter((r) => during(r) === 0).map((r) => r.name)).toEqual([]);
  });

  it("[fleet-svc] SIGTERM: Health/Check answered NOT_SERVING for the drain delay before the replica went away", () => {
    expect(drains.map((d) => d.name)).toEqual(["cube-2", "presence-2"]);
    for (const drain of drains) {
      const i = drain.health.findIndex((h) => h.status === "NOT_SERVING");
      expect({ name: drain.name, sawNotServing: i >= 0 }).toEqual({ name: drain.name, sawNotServing: true });
      const until = drain.health[i + 1]?.at ?? drain.exitedAt;
      // Observed by polling every 50 ms, so up to one poll shorter than it was.
      expect(until - drain.health[i]!.at).toBeGreaterThanOrEqual(DRAIN_MS - 200);
    }
  });

  it("[fleet-svc] SIGTERM: streams on a draining replica got the typed going_away and resumed elsewhere", () => {
    const pinned = [...scenario.activity, ...scenario.presence].filter((r) => r.name.includes("-2 first"));
    expect(pinned.map((r) => [r.name, r.goingAway > 0])).toEqual(pinned.map((r) => [r.name, true]));
  });
});
