import type { Scenario } from "./scenario";
import { compareSequence, type SequenceReport, type StreamRecord } from "./streams";

/** What a finished run found: the truth, every stream's comparison with it, and the closing numbers. */
export interface RunResult {
  readonly log: string[];
  readonly ackedMissingFromLog: string[];
  readonly activity: SequenceReport[];
  readonly presence: SequenceReport[];
  readonly transitions: string[];
  readonly lines: string[];
}

function describeReport(r: SequenceReport): string {
  if (r.exact) return "exact";
  const parts = [];
  if (r.missing.length) parts.push(`${r.missing.length} missing`);
  if (r.duplicates.length) parts.push(`${r.duplicates.length} duplicated`);
  if (r.unexpected.length) parts.push(`${r.unexpected.length} unexpected`);
  if (r.firstDisorder >= 0) parts.push(`out of order from #${r.firstDisorder}`);
  return parts.join(", ");
}

function streamLine(record: StreamRecord, report: SequenceReport): string {
  const extra = record.errorEvents.length ? `; ${record.errorEvents.length} error events` : "";
  return `  ${record.name.padEnd(34)} ${String(report.delivered).padStart(6)} / ${String(report.expected).padEnd(6)} opened ${record.opens}x — ${describeReport(report)}${extra}`;
}

/** Compares every stream with the truth and writes the closing numbers. */
export function buildResult(
  scenario: Scenario,
  truth: { log: string[]; transitions: Map<StreamRecord, string[]>; authors?: Map<string, string> },
): RunResult {
  const { fleet } = scenario;
  const logSet = new Set(truth.log);
  const ackedMissingFromLog = scenario.acked.filter((a) => !logSet.has(a.id)).map((a) => `${a.surface} ${a.message}`);
  // An MCP session's truth is the log without its own drone's posts (the gateway does not push those back).
  const truthFor = (r: StreamRecord) =>
    r.ownDroneId ? truth.log.filter((id) => truth.authors?.get(id) !== r.ownDroneId) : truth.log;
  const activity = scenario.activity.map((r) => compareSequence(r.name, truthFor(r), r.keys()));
  const presence = scenario.presence.map((r) => compareSequence(r.name, truth.transitions.get(r)!, r.keys()));
  const bySurface = new Map<string, number>();
  for (const a of scenario.acked) bySurface.set(a.surface, (bySurface.get(a.surface) ?? 0) + 1);
  const longest = [...truth.transitions.values()].reduce((a, b) => (b.length > a.length ? b : a), [] as string[]);
  const t0 = fleet.startedAt;
  const excused = fleet.ledger.excused();
  const unexcused = fleet.ledger.unexcused();
  const lines = [
    `fleet run ${fleet.databaseName} (${fleet.options.targets} targets), logs in ${fleet.runDir}`,
    `entries acknowledged: ${scenario.acked.length} (${[...bySurface].map(([k, v]) => `${k} ${v}`).join(", ")}); in the log after genesis: ${truth.log.length}; acknowledged but not in the log: ${ackedMissingFromLog.length}`,
    "activity streams (delivered / expected):",
    ...scenario.activity.map((r, i) => streamLine(r, activity[i]!)),
    `presence transitions: ${longest.length}; links acknowledged ${scenario.linksSoFar()}`,
    ...scenario.presence.map((r, i) => streamLine(r, presence[i]!)),
    `kills survived: ${fleet.ledger.kills.length} (${fleet.ledger.kills.map((k) => `${k.name} at ${fleet.since(k.signalledAt)}`).join(", ") || "none"})`,
    `Redis outage: ${fleet.proxy.outageSeconds.toFixed(1)} s (${fleet.proxy.outages.map((o) => `${fleet.since(o.from)}..${fleet.since(o.to)}`).join(", ") || "none"})`,
    `requests: ${Object.entries(fleet.ledger.counts())
      .map(([k, v]) => `${k} ${v.total}${v.failed ? ` (${v.failed} failed)` : ""}`)
      .join(", ")}`,
    `failed while a process was being killed (excused): ${excused.length}`,
    ...fleet.ledger.describe(excused, t0).map((l) => `  ${l}`),
    `failed with no kill to explain it: ${unexcused.length}`,
    ...fleet.ledger.describe(unexcused, t0).map((l) => `  ${l}`),
  ];
  return {
    log: truth.log,
    ackedMissingFromLog,
    activity,
    presence,
    transitions: longest,
    lines,
  };
}

/** A report of one stream for an assertion message: just what is wrong. */
export function summary(reports: readonly SequenceReport[]): Record<string, string> {
  return Object.fromEntries(reports.map((r) => [r.name, describeReport(r)]));
}
