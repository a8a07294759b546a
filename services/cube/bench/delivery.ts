// Append→delivery figures of the cube benchmark (index.ts): subscribers in child processes
// (bench/subscribers.ts) on a target — the service, or the floor — appends at a fixed rate, and
// every delivery checked to arrive exactly once. `pairedLatencyAt` drives the service and its floor
// in alternating slices, so that both see the same machine (as presence's churn does).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { PerformanceObserver } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const nowMs = () => performance.now();

/** Wall-clock milliseconds with sub-ms precision, comparable across the bench's processes. */
const wallMs = () => performance.timeOrigin + performance.now();

/** What a delivery figure drives: the service, or the floor (same subscribers, same rate). */
export interface Target {
  readonly address: string;
  append(message: string, i: number): Promise<unknown>;
}

/** One delivery figure: what was asked and held, and every delivery's latency (sorted). */
export interface Delivery {
  readonly subscribers: number;
  readonly rate: number;
  readonly offered: number;
  readonly delivered: number;
  readonly expected: number;
  readonly duplicates: number;
  readonly latencies: number[];
  readonly appendTimes: number[];
  /** Deliveries that never arrived (with `duplicates`, the run fails). */
  readonly missing: number;
  /**
   * CPU of the bench's process (the service and the floor's server, and the appends' client) per
   * timed delivery, from each slice's first append until its deliveries were all in.
   */
  readonly cpuUsPerDelivery: number;
  /**
   * Garbage-collection pauses of the bench's process (which holds the service, the floor and the
   * appends' client) inside this side's slices: their total and the longest (ms). A pause
   * delays whatever append or write is in flight, so a few long ones can set a low-n p99.
   */
  readonly gc: GcPauses;
  /** CPU of the subscriber processes per delivery, from their streams' `ready` on (warm-up included). */
  readonly clientCpuUsPerDelivery: number;
}

/** Garbage-collection pauses within a stretch of time. */
export interface GcPauses {
  readonly totalMs: number;
  readonly maxMs: number;
}

/**
 * Records this process's garbage-collection pauses (`gc` performance entries) until `stop`;
 * `within` sums those that began inside the given windows (performance.now() ms).
 */
function recordGcPauses() {
  const pauses: { start: number; ms: number }[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pauses.push({ start: entry.startTime, ms: entry.duration });
  });
  observer.observe({ entryTypes: ["gc"] });
  return {
    within(windows: readonly { from: number; to: number }[]): GcPauses {
      const inside = pauses.filter((p) => windows.some((w) => p.start >= w.from && p.start < w.to));
      return {
        totalMs: inside.reduce((n, p) => n + p.ms, 0),
        maxMs: inside.reduce((n, p) => Math.max(n, p.ms), 0),
      };
    },
    stop: () => observer.disconnect(),
  };
}

/**
 * A full garbage collection of this process (V8's `gc`, exposed at run time). The service and
 * the floor share the bench's heap, so a scavenge fell on whichever side was running when the
 * young generation filled, whoever had filled it: with 5–10 pauses of 5–25 ms in a side's 10 s
 * and a low-n p99 the fifth-worst append, the ratio was a count of where the pauses landed (one
 * s100 run: 46 ms of pauses in the service's slices and none in the floor's, the next 0 and 52).
 * Collected before every slice (not timed), a pause inside a slice is that slice's own garbage.
 */
const collectGarbage = (() => {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
})();

/** What a delivery run needs: the cube its readers read and one reader token per 10 streams. */
export interface DeliveryJob {
  readonly cubeId: string;
  readonly readers: readonly string[];
  readonly streamsPerClient: number;
  readonly seconds: number;
  readonly warmupSeconds: number;
}

/** One child process holding SubscribeActivity streams (bench/subscribers.ts). */
function subscriberProcess(job: { address: string; cubeId: string; tokens: string[] }) {
  const child = spawn(process.execPath, [...process.execArgv, join(__dirname, "subscribers.ts")], {
    env: { ...process.env, BENCH_JOB: JSON.stringify(job) },
    stdio: ["pipe", "pipe", "inherit"],
  });
  // The child answers each request with one line, in order (READY first): read them one by one.
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exited = new Promise<number>((resolve) => child.on("close", (code) => resolve(code ?? 1)));
  const answer = async (expected: (line: string) => boolean): Promise<string> => {
    const next = await lines.next();
    if (next.done || !expected(next.value)) throw new Error(`subscriber process answered ${next.value ?? "nothing"}`);
    return next.value;
  };
  return {
    ready: answer((line) => line === "READY").then(() => undefined),
    /** Resolves once every stream of this process saw `n` timed entries (or the child gave up waiting). */
    async upto(n: number): Promise<void> {
      child.stdin.write(`${JSON.stringify({ upto: n })}\n`);
      await answer((line) => line === `UPTO ${n}`);
    },
    async finish(total: number): Promise<{ latencies: number[]; missing: number; duplicates: number; cpuUs: number }> {
      child.stdin.write(`${JSON.stringify({ total })}\n`);
      const result = await answer((line) => line.startsWith("{"));
      const code = await exited;
      if (code !== 0) throw new Error(`subscriber process exited ${code}`);
      return JSON.parse(result);
    },
  };
}

/** A target's subscribers (one process per 50 streams, at most 2: the machine's cores), ready. */
async function subscribe(job: DeliveryJob, subscribers: number, target: Target) {
  const processes = Math.min(2, Math.ceil(subscribers / 50));
  const children = Array.from({ length: processes }, (_, k) => {
    const tokens = Array.from({ length: subscribers }, (_, i) => i)
      .filter((i) => i % processes === k)
      .map((i) => job.readers[Math.floor(i / job.streamsPerClient)] as string);
    return subscriberProcess({ address: target.address, cubeId: job.cubeId, tokens });
  });
  await Promise.all(children.map((c) => c.ready));
  return children;
}

/**
 * Appends entries `from` … `to - 1` to `target` at `rate` (negative indices: warm-up, not timed;
 * the others timed into `appendTimes`). Returns how long the appends took, to the last answer.
 */
async function drive(
  target: Target,
  subscribers: number,
  rate: number,
  range: { from: number; to: number },
  appendTimes: number[],
): Promise<number> {
  const startAt = nowMs();
  const pending: Promise<unknown>[] = [];
  for (let i = range.from; i < range.to; i++) {
    const wait = startAt + ((i - range.from) * 1000) / rate - nowMs();
    if (wait > 0) await sleep(wait);
    const sent = wallMs();
    const call = target.append(i < 0 ? `warm@${i}` : `latency@${subscribers}.${i}@${sent}`, i - range.from);
    pending.push(i < 0 ? call : call.then(() => appendTimes.push(wallMs() - sent)));
  }
  await Promise.all(pending);
  return nowMs() - startAt;
}

/** Tells the subscribers the appends are done and gathers what each stream saw. */
async function collect(
  children: Awaited<ReturnType<typeof subscribe>>,
  figure: {
    subscribers: number;
    rate: number;
    total: number;
    warm: number;
    sentMs: number;
    appendTimes: number[];
    cpuUs: number;
    gc: GcPauses;
  },
): Promise<Delivery> {
  const { subscribers, rate, total, warm, sentMs, appendTimes, cpuUs, gc } = figure;
  const results = await Promise.all(children.map((c) => c.finish(total)));
  const latencies = results.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const missing = results.reduce((n, r) => n + r.missing, 0);
  const duplicates = results.reduce((n, r) => n + r.duplicates, 0);
  const clientCpuUs = results.reduce((n, r) => n + r.cpuUs, 0);
  appendTimes.sort((a, b) => a - b);
  return {
    subscribers,
    rate,
    offered: (total / Math.max(sentMs, 1)) * 1000,
    delivered: latencies.length,
    expected: total * subscribers,
    duplicates,
    latencies,
    appendTimes,
    missing,
    cpuUsPerDelivery: cpuUs / Math.max(1, total * subscribers),
    gc,
    clientCpuUsPerDelivery: clientCpuUs / Math.max(1, (total + warm) * subscribers),
  };
}

/** One delivery figure: `subscribers` streams on `target`, a warm-up second, then `seconds` of appends at `rate`. */
export async function latencyAt(job: DeliveryJob, subscribers: number, rate: number, target: Target) {
  const [figure] = await slicedLatencyAt(job, subscribers, rate, [target], 1);
  return figure!;
}

/**
 * The service and its floor at one point, driven in `slices` alternating slices of the same
 * length (service, floor, service, …): both see the same machine, where a stall of a shared
 * host in one 5 s window used to decide the ratio (s1's floor p99 257 ms in one run, the
 * service's 109 ms in another). A slice ends once its deliveries are all in, so no backlog
 * loads the other side's slice.
 */
export async function pairedLatencyAt(
  job: DeliveryJob,
  subscribers: number,
  rate: number,
  targets: { service: Target; floor: Target },
  slices: number,
): Promise<{ service: Delivery; floor: Delivery }> {
  const [service, floor] = await slicedLatencyAt(job, subscribers, rate, [targets.service, targets.floor], slices);
  return { service: service!, floor: floor! };
}

/**
 * Delivery figures of `sides` at one point: each side's subscribers held open throughout, a
 * warm-up at `rate` on each (not timed, not counted: pools, JIT and the subscribers' decoders
 * warm), then the timed appends in `slices` slices, the sides taking turns within each.
 */
async function slicedLatencyAt(
  job: DeliveryJob,
  subscribers: number,
  rate: number,
  sides: readonly Target[],
  slices: number,
): Promise<Delivery[]> {
  const children = await Promise.all(sides.map((target) => subscribe(job, subscribers, target)));
  const total = Math.max(slices, Math.round(rate * job.seconds));
  const perSlice = Math.ceil(total / slices);
  const warm = Math.round(rate * job.warmupSeconds);
  for (const target of sides) await drive(target, subscribers, rate, { from: -warm, to: 0 }, []);
  const appendTimes = sides.map((): number[] => []);
  const sentMs = sides.map(() => 0);
  const cpuUs = sides.map(() => 0);
  const windows = sides.map((): { from: number; to: number }[] => []);
  const gc = recordGcPauses();
  for (let from = 0; from < total; from += perSlice) {
    const to = Math.min(total, from + perSlice);
    for (const [k, target] of sides.entries()) {
      collectGarbage();
      const cpu = process.cpuUsage();
      const began = performance.now();
      sentMs[k]! += await drive(target, subscribers, rate, { from, to }, appendTimes[k]!);
      // The slice's deliveries are all in before the other side starts: no backlog crosses over.
      await Promise.all(children[k]!.map((child) => child.upto(to)));
      const used = process.cpuUsage(cpu);
      cpuUs[k]! += used.user + used.system;
      windows[k]!.push({ from: began, to: performance.now() });
    }
  }
  await new Promise((resolve) => setImmediate(resolve)); // the observer's last entries
  const pauses = windows.map((w) => gc.within(w));
  gc.stop();
  return Promise.all(
    sides.map((_, k) =>
      collect(children[k]!, {
        subscribers,
        rate,
        total,
        warm,
        sentMs: sentMs[k]!,
        appendTimes: appendTimes[k]!,
        cpuUs: cpuUs[k]!,
        gc: pauses[k]!,
      }),
    ),
  );
}
