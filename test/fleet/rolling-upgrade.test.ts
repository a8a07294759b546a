import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { clientsConnected, connectionsTo } from "./harness/connections";
import { Fleet } from "./harness/fleet";
import { appendOverConnect, followSse } from "./harness/gateway-clients";
import { GatewayRouter } from "./harness/http";
import type { RequestRecord } from "./harness/ledger";
import { StatelessAgent } from "./harness/mcp-stateless";
import { type DrainRecord, type FleetProcess, poll } from "./harness/processes";
import {
  type BuiltRelease,
  buildRelease,
  migrate,
  previousRelease,
  REPO_ROOT,
  unavailableReason,
} from "./harness/release";
import { buildResult, type RunResult, summary } from "./harness/report";
import { Scenario } from "./harness/scenario";
import { type SequenceReport, StreamRecord } from "./harness/streams";
import { nonAlternating } from "./harness/truth";

/**
 * A rolling upgrade under load, as `helm upgrade` does it: the previous release (built from git
 * history, `test/fleet/previous-release.json`) migrates a fresh database and runs the whole fleet;
 * under load, this checkout's migration runs (the migration Job), an old replica starts again on the
 * new schema, then the second replica of each service is replaced by this checkout's build (old and
 * new side by side: gateway A old, gateway B new, one cube and one presence replica of each
 * version), then the first ones. Every replacement is a SIGTERM drain, which excuses nothing but
 * the connections a draining gateway drops (listed apart; see `gatewayDrainOf`). The same ledger as
 * the other suites: every acknowledged append exactly once, in order, on every stream (resumed
 * across versions), every client served.
 */
const RELEASE = previousRelease();
const SKIP = unavailableReason(RELEASE);
/** UMX_DRAIN_DELAY_MS of the services: how long a SIGTERMed replica answers NOT_SERVING while still serving. */
const DRAIN_MS = 1_000;

/** The migration directories of a tree's service. */
const migrationsOf = (root: string, service: string) =>
  readdirSync(join(root, "services", service, "prisma", "migrations"), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort();

/** The sum of a Prometheus counter's samples whose labels contain `labels`, read from a process's `/metrics`. */
async function counter(target: FleetProcess, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${target.metricsPort}/metrics`)).text();
  return text
    .split("\n")
    .filter((line) => line.startsWith(`${name}{`) && line.includes(labels))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}

if (SKIP) process.stderr.write(`rolling-upgrade: skipped — ${SKIP}\n`);

(SKIP ? describe.skip : describe)(
  `fleet: rolling upgrade from ${RELEASE.version} (${RELEASE.commit}) under load${SKIP ? ` — skipped: ${SKIP}` : ""}`,
  () => {
    let built: BuiltRelease;
    let fleet: Fleet;
    let scenario: Scenario;
    let result: RunResult;
    let migration = "";
    let recordedMigrations: string[] = [];
    let sessionsAtStart: (string | undefined)[] = [];
    /** The output of cube-1's second start: the previous release started again after this build's migration. */
    let oldRestartLog = "";
    const stalls: string[] = [];
    const drains: DrainRecord[] = [];
    /** The window in which one replica of each service ran at each version. */
    const sideBySide = { from: 0, to: 0 };
    const servedInWindow: Record<string, number> = {};

    const progress = async (entries: number, links: number, what: string) => {
      try {
        await scenario.progress(entries, links, what, 30_000);
        fleet.note(`progress: ${what}`);
      } catch (error) {
        stalls.push((error as Error).message);
        fleet.note(`STALL: ${(error as Error).message}`);
      }
    };

    /**
     * Drains `replica` and starts it again from `root`, then waits until the processes that carry the
     * load to it (the gateways, and this test's own clients) are connected to it again, before
     * anything else drains. (Presence dials cube too, but only connects when it has a call to make.)
     */
    const replace = async (replica: FleetProcess, root: string) => {
      // Each gateway holds one connection per channel (one per service it calls): as many again after.
      const dialers =
        replica.service === "cube" || replica.service === "presence"
          ? fleet.gateways.map((g) => ({
              name: g.name,
              pid: g.pid,
              atLeast: Math.max(1, connectionsTo(replica, g.pid)),
            }))
          : [];
      drains.push(await fleet.replace(replica, root));
      if (dialers.length === 0) return;
      const clients = [...dialers, { name: "the test", pid: process.pid, atLeast: 1 }];
      await clientsConnected(replica, clients).catch((error: Error) => stalls.push(error.message));
    };

    const upgrade = async (replicas: FleetProcess[]) => {
      for (const replica of replicas) {
        await replace(replica, REPO_ROOT);
        await progress(20, 4, `after ${replica.name} was replaced by this build`);
      }
    };

    /** Ends the late streams' loops (before the scenario closes their clients). */
    const lateStreams = new AbortController();

    /** A Connect appender and an SSE activity reader (from genesis) on gateway B, as the scenario's clients are recorded. */
    const openLateClients = () => {
      const { world } = scenario;
      const stop = new AbortController();
      const appender = new GatewayRouter(() => fleet.gatewayUrls(), fleet.ledger, "connect (B)", 1);
      const loop = appendOverConnect(
        appender,
        world.clients[8]!.token,
        world.cubeId,
        scenario.acked,
        stop.signal,
        100,
        "connect-b",
      );
      const name = "sse activity from genesis (gateway-B, new)";
      const record = new StreamRecord(name, "sse", "activity", scenario.genesis);
      const reader = new GatewayRouter(() => fleet.gatewayUrls(), fleet.ledger, "sse genesis (B)", 1);
      const path = `/v1/cubes/${world.cubeId}/events`;
      const source = followSse(record, reader, path, world.clients[9]!.token, fleet.ledger, scenario.gatewayName);
      scenario.activity.push(record);
      scenario.sse.push({ ...source, record });
      return {
        sse: record,
        stop: async () => {
          stop.abort();
          await loop;
        },
      };
    };

    /** An MCP 2026-07-28 agent on gateway B once it is new: listens from genesis and posts, both through B. */
    const openStatelessOnB = async () => {
      const { world } = scenario;
      const routers = [0, 1].map((i) => {
        const router = new GatewayRouter(() => fleet.gatewayUrls(), fleet.ledger, `mcp-2026 (B) #${i}`, 1);
        router.pin(1);
        return router;
      });
      const name = "mcp-2026 listen (gateway-B, new)";
      const agent = await StatelessAgent.open(
        routers[0]!,
        routers[1]!,
        world.clients[10]!.token,
        fleet.ledger,
        name,
        scenario.genesis,
      );
      await agent.attach(world.cubeId, world.roleId);
      scenario.stateless.push(agent);
      scenario.activity.push(agent.record);
      const listening = agent.listenLoop(lateStreams.signal);
      const stop = new AbortController();
      const posting = agent.postLoop(scenario.acked, stop.signal, 150);
      return {
        record: agent.record,
        stop: async () => {
          stop.abort();
          await posting;
        },
        listening,
      };
    };

    beforeAll(async () => {
      built = await buildRelease(RELEASE);
      process.stdout.write(
        `\nprevious release ${built.version} (${built.sha}) in ${built.root}: ${built.buildMs ? `built in ${(built.buildMs / 1000).toFixed(1)} s` : "cached"}\n`,
      );
      fleet = await Fleet.start({
        label: "upgrade",
        targets: "balanced",
        root: built.root,
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
      // 0.1.0's gateways do not speak MCP 2026-07-28: the scenario's 2025-11-25 sessions only.
      scenario = await Scenario.start(fleet, "cross", 11, { mcp2026: false });
      sessionsAtStart = scenario.agents.map((a) => a.sessionId);
      await progress(40, 8, `warm-up, every process on ${built.version}`);
      const [cube, presence, gateways] = [fleet.cube, fleet.presence, fleet.gateways];

      // The migration Job of the upgrade, while the old release serves.
      const migrating = migrate(REPO_ROOT, fleet.databaseUrl);
      await progress(10, 2, "with this build's migration started");
      migration = await migrating;
      fleet.note(`migrated by this build: ${migration.replaceAll("\n", "; ")}`);
      await progress(40, 8, `${built.version} on the new schema`);
      // An old pod rescheduled mid-rollout: the previous release starts on the new schema.
      await replace(cube[0]!, built.root);
      oldRestartLog = readFileSync(cube[0]!.logPath, "utf8").split("=== start #2")[1] ?? "";
      await progress(20, 4, `after cube-1 started again on ${built.version}`);

      await upgrade([cube[1]!, presence[1]!, fleet.device, gateways[1]!]);
      // One replica of each service at each version, behind gateway A (old) and B (new).
      const before = {
        cube: await counter(cube[1]!, "grpc_server_started_total", 'grpc_method="AppendEntry"'),
        presence: await counter(presence[1]!, "grpc_server_started_total", 'grpc_method="Link"'),
      };
      // The scenario's HTTP clients stick to gateway A since B went away: two new clients come to B
      // (a Connect appender, and an SSE reader from genesis: the whole log, written by both versions).
      const late = openLateClients();
      const stateless = await openStatelessOnB();
      await poll(
        () => late.sse.readyCount > 0 && stateless.record.readyCount > 0,
        "the SSE reader and the MCP 2026 listen opened on the new gateway B to be live",
        30_000,
      );
      sideBySide.from = Date.now();
      await progress(150, 24, "old and new side by side");
      sideBySide.to = Date.now();
      servedInWindow["cube-2 AppendEntry"] =
        (await counter(cube[1]!, "grpc_server_started_total", 'grpc_method="AppendEntry"')) - before.cube;
      servedInWindow["presence-2 Link"] =
        (await counter(presence[1]!, "grpc_server_started_total", 'grpc_method="Link"')) - before.presence;
      const inWindow = (via: string) =>
        fleet.ledger.requests.filter(
          (r) => r.ok && r.via === via && r.startedAt >= sideBySide.from && r.endedAt <= sideBySide.to,
        ).length;
      servedInWindow["gateway-A requests"] = inWindow(gateways[0]!.address);
      servedInWindow["gateway-B requests"] = inWindow(gateways[1]!.address);

      await upgrade([cube[0]!, presence[0]!, gateways[0]!]);
      await progress(40, 8, "every process on this build");
      await late.stop();
      await stateless.stop();
      await scenario.stopLoad();
      result = buildResult(scenario, await scenario.settle());
      const admin = new pg.Client({ connectionString: fleet.databaseUrl });
      await admin.connect();
      recordedMigrations = (
        await admin.query<{ name: string }>("SELECT name FROM cube._unimatrix_migrations ORDER BY name")
      ).rows.map((r) => r.name);
      await admin.end();
      process.stdout.write(
        `\n${result.lines.join("\n")}\nmigration: ${migration}\nserved side by side: ${JSON.stringify(servedInWindow)} in ${((sideBySide.to - sideBySide.from) / 1000).toFixed(1)} s\nconnections dropped by a gateway drain:\n${
          fleet.ledger
            .describe(
              fleet.ledger.unexcused().filter((r) => gatewayDrainOf(r)),
              fleet.startedAt,
            )
            .map((l) => `  ${l}`)
            .join("\n") || "  none"
        }\nstalls: ${stalls.length ? stalls.join("; ") : "none"}\n`,
      );
    }, 600_000);

    afterAll(async () => {
      lateStreams.abort();
      await scenario?.close();
      await fleet?.stop();
    }, 60_000);

    const exact = (reports: SequenceReport[]) => Object.fromEntries(reports.map((r) => [r.name, "exact"]));
    const of = (surface: string, reports: SequenceReport[], records: StreamRecord[]) =>
      reports.filter((_, i) => records[i]!.surface === surface);

    it("built the previous release from its commit, and this build's migration added exactly the migrations since", () => {
      expect(built.sha.startsWith(RELEASE.commit)).toBe(true);
      const added = migrationsOf(REPO_ROOT, "cube").filter((m) => !migrationsOf(built.root, "cube").includes(m));
      expect(added.length).toBeGreaterThan(0);
      expect(migration).toContain(`cube: applied ${added.length},`);
      expect(recordedMigrations).toEqual(migrationsOf(REPO_ROOT, "cube"));
    });

    it("the previous release started again on the new schema: it said so and served", () => {
      const added = migrationsOf(REPO_ROOT, "cube").filter((m) => !migrationsOf(built.root, "cube").includes(m));
      expect(oldRestartLog).toContain("database has migrations newer than this build");
      for (const name of added) expect(oldRestartLog).toContain(name);
    });

    it("every process ran the previous release, then this build, on the same port", () => {
      expect(fleet.processes.map((p) => [p.name, p.starts, p.root])).toEqual(
        fleet.processes.map((p) => [p.name, p.name === "cube-1" ? 3 : 2, REPO_ROOT]),
      );
      expect(drains.map((d) => d.name)).toEqual([
        "cube-1",
        "cube-2",
        "presence-2",
        "device-1",
        "gateway-B",
        "cube-1",
        "presence-1",
        "gateway-A",
      ]);
    });

    it("committed every acknowledged append and kept the load going through every step", () => {
      expect(result.ackedMissingFromLog).toEqual([]);
      expect(stalls).toEqual([]);
    });

    it("old and new replicas both served while side by side (cube-2 and presence-2 new, gateway A old and B new)", () => {
      for (const [what, count] of Object.entries(servedInWindow))
        expect({ what, served: count > 0 }).toEqual({ what, served: true });
    });

    it("gRPC SubscribeActivity streams resumed across versions: the log exactly once, in order", () => {
      expect(summary(of("grpc", result.activity, scenario.activity))).toEqual(
        exact(of("grpc", result.activity, scenario.activity)),
      );
    });

    it("gRPC WatchMachines streams resumed across versions: every transition exactly once, in order", () => {
      expect(result.transitions.length).toBeGreaterThan(0);
      expect(summary(of("grpc", result.presence, scenario.presence))).toEqual(
        exact(of("grpc", result.presence, scenario.presence)),
      );
      expect(nonAlternating(result.transitions)).toEqual([]);
    });

    it("SSE activity and machine streams (EventSource, Last-Event-ID) across versions: exactly once, in order, no error event", () => {
      const sse = [...scenario.activity, ...scenario.presence].filter((r) => r.surface === "sse");
      expect(
        summary([...of("sse", result.activity, scenario.activity), ...of("sse", result.presence, scenario.presence)]),
      ).toEqual(
        exact([...of("sse", result.activity, scenario.activity), ...of("sse", result.presence, scenario.presence)]),
      );
      expect(sse.map((r) => [r.name, r.errorEvents])).toEqual(sse.map((r) => [r.name, []]));
    });

    it("MCP 2026-07-28 on the new gateway B, listening from genesis: the log written by both releases exactly once, in order", () => {
      const reports = of("mcp", result.activity, scenario.activity).filter((r) => r.name.startsWith("mcp-2026"));
      expect(reports.map((r) => r.name)).toEqual(["mcp-2026 listen (gateway-B, new)"]);
      expect(summary(reports)).toEqual(exact(reports));
    });

    it("MCP 2025-11-25 sessions opened on the previous release and continued on this build: every entry pushed exactly once, in order", () => {
      // The same Mcp-Session-Id throughout: the new gateways took over the old ones' sessions (in Redis).
      expect(sessionsAtStart).toEqual(scenario.agents.map(() => expect.any(String)));
      expect(scenario.agents.map((a) => a.sessionId)).toEqual(sessionsAtStart);
      expect(summary(of("mcp", result.activity, scenario.activity))).toEqual(
        exact(of("mcp", result.activity, scenario.activity)),
      );
    });

    /** A connection lost under a request or stream (no HTTP status, no tool error: those are never excused). */
    const LOST =
      /^(disconnected: TypeError: terminated|network ECONNRESET|network UND_ERR_SOCKET|failed: fetch failed)/;
    /**
     * The gateway drain (either release) that lost a connection: the request or stream was on the
     * draining gateway and lost its connection between the SIGTERM and the exit. Both releases
     * destroy the SSE sockets still open after UMX_SHUTDOWN_GRACE_MS (EventSource reconnects with
     * Last-Event-ID: those streams are checked exact above), and close idle keep-alive connections
     * at SIGTERM, which loses a request the client was sending on one at that moment.
     */
    const gatewayDrainOf = (r: RequestRecord) => {
      if (!LOST.test(r.outcome)) return undefined;
      return drains.find((d) => {
        const gateway = fleet.gateways.find((g) => g.name === d.name);
        const on = gateway && [gateway.name, gateway.address, `http://${gateway.address}`].includes(r.via);
        return on && r.endedAt >= d.signalledAt && r.endedAt <= d.exitedAt + 1_000;
      });
    };

    it("no request failed but connections a draining gateway dropped (its SSE streams, which resumed above; a request on a keep-alive connection it closed): a drain excuses nothing else", () => {
      const failed = fleet.ledger.unexcused();
      expect(
        fleet.ledger.describe(
          failed.filter((r) => !gatewayDrainOf(r)),
          fleet.startedAt,
        ),
      ).toEqual([]);
      // At most one break per SSE stream per gateway drain.
      const sseBreaks = failed.filter((r) => gatewayDrainOf(r) && r.surface === "sse stream");
      const sse = [...scenario.activity, ...scenario.presence].filter((r) => r.surface === "sse");
      expect(sseBreaks.length).toBeLessThanOrEqual(sse.length * 2);
    });

    it("streams on the draining old replicas got the typed going_away and resumed elsewhere", () => {
      const pinned = [...scenario.activity, ...scenario.presence].filter((r) => r.name.includes("-2 first"));
      expect(pinned.map((r) => [r.name, r.goingAway > 0])).toEqual(pinned.map((r) => [r.name, true]));
    });
  },
);
