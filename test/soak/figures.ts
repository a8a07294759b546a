// What the soak measures and how it reduces it: per process the series of its /metrics that creep
// when something leaks (resident memory, heap, handles, descriptors, feed backlog), the database's
// connections, and the least-squares slope of each per hour; request latencies per quarter.
import { percentile } from "@unimatrix/service-kit/testing";
import type { Ledger } from "../fleet/harness/ledger";
import type { FleetProcess } from "../fleet/harness/processes";

/** The /metrics series the soak follows, by the name it reports them under. */
const SERIES = {
  rss_mb: { metric: "process_resident_memory_bytes", scale: 1 / 2 ** 20 },
  heap_mb: { metric: "nodejs_heap_size_used_bytes", scale: 1 / 2 ** 20 },
  handles: { metric: "nodejs_active_handles_total", scale: 1 },
  fds: { metric: "process_open_fds", scale: 1 },
  backlog: { metric: "unimatrix_feed_backlog_items", scale: 1 },
} as const;

/** A figure the soak follows per process. */
export type ProcessFigure = keyof typeof SERIES;

/** The figures the soak reports a slope of, per process. */
export const PROCESS_FIGURES = Object.keys(SERIES) as ProcessFigure[];

/** One sampling round: when (ms since the load started), each process's figures, the database's connections. */
export interface Sample {
  readonly at: number;
  readonly processes: Record<string, Partial<Record<ProcessFigure, number>>>;
  readonly dbConnections: number;
}

/** The value of an unlabelled series (or the sum over its label sets) in a /metrics text; undefined when absent. */
function seriesValue(text: string, metric: string): number | undefined {
  let sum: number | undefined;
  for (const match of text.matchAll(new RegExp(`^${metric}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, "gm")))
    sum = (sum ?? 0) + Number(match[1]);
  return sum;
}

/** Scrapes one process's /metrics into its figures (empty when it does not answer). */
export async function scrape(process: FleetProcess): Promise<Partial<Record<ProcessFigure, number>>> {
  if (process.metricsPort === undefined) return {};
  const response = await fetch(`http://127.0.0.1:${process.metricsPort}/metrics`).catch(() => undefined);
  if (!response?.ok) return {};
  const text = await response.text();
  const figures: Partial<Record<ProcessFigure, number>> = {};
  for (const [name, { metric, scale }] of Object.entries(SERIES)) {
    const value = seriesValue(text, metric);
    if (value !== undefined) figures[name as ProcessFigure] = value * scale;
  }
  return figures;
}

/** Whether a figure is memory (its slope is taken through the floors: see `floors`). */
export const isMemory = (figure: ProcessFigure): boolean => figure.endsWith("_mb");

/** Samples taken after the warm-up (the first `warmup` share of the run: heaps, pools and JIT settle). */
export function steady(samples: readonly Sample[], runMs: number, warmup: number): Sample[] {
  return samples.filter((s) => s.at >= runMs * warmup);
}

/** Surfaces whose requests are calls (not streams or links held open on purpose). */
const isCall = (surface: string) => !/stream|link|sse/i.test(surface);

/**
 * p99 of the successful calls the load made, in milliseconds, for each quarter of [from, to)
 * (by start time), with their counts.
 */
export function p99PerQuarter(ledger: Ledger, from: number, to: number): { p99: number; calls: number }[] {
  const quarter = (to - from) / 4;
  return [0, 1, 2, 3].map((q) => {
    const latencies = ledger.requests
      .filter(
        (r) => r.ok && isCall(r.surface) && r.startedAt >= from + q * quarter && r.startedAt < from + (q + 1) * quarter,
      )
      .map((r) => r.endedAt - r.startedAt)
      .sort((a, b) => a - b);
    return { p99: percentile(latencies, 99), calls: latencies.length };
  });
}
