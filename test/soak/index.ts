// `npm run bench soak`: steady mixed load on the fleet for a long time, watching for creep.
// The fleet harness's processes and load (test/fleet: two gateways, two cube and two presence
// replicas, one device; appends over gRPC, Connect and MCP, every kind of stream held open, machine
// links cycling) plus acks and claim/release through MCP, for SOAK_MINUTES (default 30). Every
// SOAK_SAMPLE_SECONDS each process's /metrics and the database's connections are sampled; after a
// warm-up (SOAK_WARMUP, a share of the run, default 0.2) the least-squares slope per hour of each
// is printed (memory through the lowest sample of every SOAK_WINDOW_SAMPLES, default 4: the floor
// the collector leaves, which a leak lifts), with the p99 of the calls per quarter of the run and whether every stream still got
// the log exactly once. BENCH lines: soak.{rss_mb,heap_mb,handles,fds,backlog}_per_h.<process>,
// soak.db_conns_per_h, soak.backlog_per_h, soak.p99_ms.q1..q4.
import { bench, floors, loadAverage, slopePerHour, TEST_DATABASE_URL } from "@unimatrix/service-kit/testing";
import pg from "pg";
import { Fleet } from "../fleet/harness/fleet";
import type { McpAgent } from "../fleet/harness/mcp";
import { buildResult, summary } from "../fleet/harness/report";
import { Scenario } from "../fleet/harness/scenario";
import { pause } from "../fleet/harness/streams";
import { isMemory, PROCESS_FIGURES, p99PerQuarter, type Sample, scrape, steady } from "./figures";

const MINUTES = Number(process.env.SOAK_MINUTES ?? 30);
const SAMPLE_SECONDS = Number(process.env.SOAK_SAMPLE_SECONDS ?? Math.min(30, Math.max(5, (MINUTES * 60) / 60)));
const WARMUP = Number(process.env.SOAK_WARMUP ?? 0.2);
const WINDOW = Number(process.env.SOAK_WINDOW_SAMPLES ?? 4);
for (const [name, value] of Object.entries({
  SOAK_MINUTES: MINUTES,
  SOAK_SAMPLE_SECONDS: SAMPLE_SECONDS,
  SOAK_WINDOW_SAMPLES: WINDOW,
}))
  if (!(value > 0)) throw new Error(`${name} must be a positive number`);
if (!(WARMUP >= 0 && WARMUP < 1)) throw new Error("SOAK_WARMUP must be a share of the run in [0, 1)");

const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");
const note = (text: string) => process.stdout.write(`${text}\n`);

/** The agent acks the newest gRPC-appended entry, claims it and releases it, every `everyMs`. */
function acksAndClaims(scenario: Scenario, agent: McpAgent, signal: AbortSignal, everyMs: number): Promise<void> {
  const ledger = scenario.fleet.ledger;
  const call = async (surface: string, tool: string, args: Record<string, unknown>) => {
    const startedAt = Date.now();
    const via = agent.router.current;
    try {
      const result = await agent.tool(tool, args);
      const text = result.isError ? (result.content[0]?.text ?? "") : "ok";
      ledger.record({ surface, via, startedAt, outcome: text, ok: !result.isError, serverSide: false });
    } catch (error) {
      ledger.record({ surface, via, startedAt, outcome: (error as Error).message, ok: false, serverSide: true });
    }
  };
  return (async () => {
    while (!signal.aborted) {
      const entry = scenario.acked.findLast((a) => a.surface === "grpc");
      if (entry) {
        await call("mcp log_ack", "log_ack", { entry_id: entry.id, quiet: true });
        await call("mcp log_claim", "log_claim", { entry_id: entry.id });
        await call("mcp log_claim release", "log_claim", { entry_id: entry.id, action: "release" });
      }
      await pause(everyMs, signal);
    }
  })();
}

/** Samples every process's figures and the run database's connections every SAMPLE_SECONDS until aborted. */
function sampleLoop(fleet: Fleet, loadStart: number, samples: Sample[], signal: AbortSignal): Promise<void> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  return (async () => {
    await admin.connect();
    try {
      while (!signal.aborted) {
        const at = Date.now() - loadStart;
        const processes: Sample["processes"] = {};
        for (const p of fleet.processes) processes[p.name] = await scrape(p);
        const { rows } = await admin.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1",
          [fleet.databaseName],
        );
        samples.push({ at, processes, dbConnections: rows[0]!.n });
        await pause(SAMPLE_SECONDS * 1000, signal);
      }
    } finally {
      await admin.end();
    }
  })();
}

async function main(): Promise<number> {
  note(`soak: ${MINUTES} min of steady mixed load, sampled every ${SAMPLE_SECONDS} s (load ${loadAverage()})`);
  const fleet = await Fleet.start({
    label: "soak",
    targets: "balanced",
    env: { presence: { PRESENCE_LINK_HEARTBEAT_MS: "1000", PRESENCE_LINK_LEASE_MS: "3000" } },
  });
  let scenario: Scenario | undefined;
  try {
    scenario = await Scenario.start(fleet, "sticky");
    const loadStart = Date.now();
    const samples: Sample[] = [];
    const extra = new AbortController();
    const loops = [
      acksAndClaims(scenario, scenario.agents[0]!, extra.signal, 500),
      sampleLoop(fleet, loadStart, samples, extra.signal),
    ];
    for (let minute = 1; minute <= Math.ceil(MINUTES); minute++) {
      await pause(Math.min(60_000, (MINUTES - (minute - 1)) * 60_000));
      note(`  ${minute} min: ${scenario.acked.length} entries acknowledged, ${fleet.ledger.requests.length} requests`);
    }
    const loadEnd = Date.now();
    extra.abort();
    await Promise.all(loops);
    await scenario.stopLoad();
    const result = buildResult(scenario, await scenario.settle());
    note(result.lines.join("\n"));

    const runMs = loadEnd - loadStart;
    const kept = steady(samples, runMs, WARMUP);
    note(
      `\nslopes per hour over ${kept.length} of ${samples.length} samples (after ${fmt(WARMUP * 100, 0)}% warm-up; ` +
        `memory through the lowest of every ${WINDOW}):`,
    );
    note(`  ${"process".padEnd(12)} ${PROCESS_FIGURES.map((f) => `${f}: first → last (per h)`.padEnd(30)).join(" ")}`);
    let backlog: { x: number; y: number }[] = kept.map((s) => ({ x: s.at, y: 0 }));
    for (const p of fleet.processes) {
      const cells: string[] = [];
      for (const figure of PROCESS_FIGURES) {
        const points = kept
          .map((s) => ({ x: s.at, y: s.processes[p.name]?.[figure] }))
          .filter((pt): pt is { x: number; y: number } => pt.y !== undefined);
        if (points.length === 0) {
          cells.push("-".padEnd(30));
          continue;
        }
        const slope = slopePerHour(isMemory(figure) ? floors(points, WINDOW) : points);
        cells.push(`${fmt(points[0]!.y, 1)} → ${fmt(points.at(-1)!.y, 1)} (${fmt(slope)})`.padEnd(30));
        if (figure === "backlog") {
          backlog = backlog.map((b) => ({ ...b, y: b.y + (points.find((pt) => pt.x === b.x)?.y ?? 0) }));
        }
        if (figure === "backlog" && p.service !== "cube" && p.service !== "presence") continue;
        bench(`soak.${figure}_per_h.${p.name}`, slope, `${figure.endsWith("_mb") ? "MB" : figure}/h`);
      }
      note(`  ${p.name.padEnd(12)} ${cells.join(" ")}`);
    }
    const conns = kept.map((s) => ({ x: s.at, y: s.dbConnections }));
    note(`  database connections: ${conns[0]?.y ?? "n/a"} → ${conns.at(-1)?.y ?? "n/a"}`);
    bench("soak.db_conns_per_h", slopePerHour(conns), "connections/h");
    bench("soak.backlog_per_h", slopePerHour(backlog), "items/h");
    const quarters = p99PerQuarter(fleet.ledger, loadStart, loadEnd);
    quarters.forEach((q, i) => {
      note(`  quarter ${i + 1}: p99 ${fmt(q.p99, 1)} ms over ${q.calls} calls`);
      bench(`soak.p99_ms.q${i + 1}`, q.p99, "ms");
    });
    bench("soak.minutes", runMs / 60_000, "min");
    const exact =
      result.ackedMissingFromLog.length === 0 &&
      [...result.activity, ...result.presence].every((r) => r.exact) &&
      fleet.ledger.unexcused().length === 0;
    if (!exact) {
      note(
        `soak: not every stream delivered exactly once, or a request failed: ${JSON.stringify(summary(result.activity))}`,
      );
      return 1;
    }
    return 0;
  } finally {
    await scenario?.close();
    await fleet.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`soak failed: ${(error as Error).stack ?? error}\n`);
    process.exit(1);
  },
);
