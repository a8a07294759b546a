// When each side of the watch-latency bench drives transitions. Presence and its floor are both
// watched at once and take turns driving in short slices, so both see the same machine: a
// stall of a shared host lands in both sides' slices, not in one side's whole window.

/** The timing of one paired point (epoch ms and durations in ms), the same in every process. */
export interface SliceJob {
  /** Epoch ms at which driving starts. */
  readonly go: number;
  /** Seconds of driving presence alone before the measured window (every machine's first link). */
  readonly warmup: number;
  /** Length of one slice (ms); slice k of the measured window is side k % 2's (0 presence, 1 the floor). */
  readonly sliceMs: number;
  /** Slices in the measured window (both sides together). */
  readonly slices: number;
  /** Transitions per second while a side drives. */
  readonly rate: number;
}

/** The measured window: transitions whose time falls in it count for latency. */
export function measuredWindow(job: SliceJob): { from: number; to: number } {
  const from = job.go + job.warmup * 1000;
  return { from, to: from + job.slices * job.sliceMs };
}

/** The stretches (epoch ms) in which `side` drives: presence also drives the warm-up. */
export function drivingWindows(job: SliceJob, side: 0 | 1): [number, number][] {
  const { from } = measuredWindow(job);
  const windows: [number, number][] = side === 0 ? [[job.go, from]] : [];
  for (let k = side; k < job.slices; k += 2) windows.push([from + k * job.sliceMs, from + (k + 1) * job.sliceMs]);
  return windows;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Calls `step` at `job.rate` per second inside each of `side`'s windows (paced from each window's
 * start, not awaiting a step before the next), then waits for the end of the measured window.
 * Returns how many steps ran.
 */
export async function driveSlices(job: SliceJob, side: 0 | 1, step: (n: number) => void): Promise<number> {
  const interval = 1000 / job.rate;
  let n = 0;
  for (const [start, end] of drivingWindows(job, side)) {
    if (start > Date.now()) await sleep(start - Date.now());
    for (let i = 0; Date.now() < end; i++) {
      step(n++);
      const wait = start + (i + 1) * interval - Date.now();
      if (wait > 0) await sleep(wait);
    }
  }
  const { to } = measuredWindow(job);
  if (to > Date.now()) await sleep(to - Date.now());
  return n;
}
