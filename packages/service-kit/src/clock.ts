/** The source of "now" for every time-dependent rule, so tests can move time by hand. */
export interface Clock {
  now(): Date;
}

/** Repeating timers (the kit's background jobs run on them), so tests can fire the rounds by hand. */
export interface Timers {
  /** Calls `run` every `ms` milliseconds until the returned function is called. */
  every(ms: number, run: () => void): () => void;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => new Date() };

/** Real timers, unref'd: they never keep the process alive. */
export const systemTimers: Timers = {
  every(ms, run) {
    const timer = setInterval(run, ms);
    timer.unref();
    return () => clearInterval(timer);
  },
};

/**
 * A clock that only moves when told to; for tests. Its timers (`every`) fire only as `advance`
 * moves the clock past them, so a test can show that a stopped timer never fires again.
 */
export class ManualClock implements Clock, Timers {
  #ms: number;
  readonly #timers = new Set<{ readonly ms: number; due: number; readonly run: () => void }>();
  constructor(start: Date | number = Date.UTC(2026, 0, 1)) {
    this.#ms = typeof start === "number" ? start : start.getTime();
  }
  now(): Date {
    return new Date(this.#ms);
  }
  every(ms: number, run: () => void): () => void {
    const timer = { ms: Math.max(1, ms), due: this.#ms + Math.max(1, ms), run };
    this.#timers.add(timer);
    return () => void this.#timers.delete(timer);
  }
  /** Timers not yet stopped. */
  get timers(): number {
    return this.#timers.size;
  }
  /** Moves the clock forward by `ms` milliseconds, firing each timer due on the way, in time order. */
  advance(ms: number): void {
    const until = this.#ms + ms;
    for (;;) {
      let next: { ms: number; due: number; run: () => void } | undefined;
      for (const timer of this.#timers) if (timer.due <= until && (!next || timer.due < next.due)) next = timer;
      if (!next) break;
      this.#ms = next.due;
      next.due += next.ms;
      next.run();
    }
    this.#ms = until;
  }
  /** Sets the clock to an instant. */
  set(at: Date | number): void {
    this.#ms = typeof at === "number" ? at : at.getTime();
  }
}

/** Waits `ms` milliseconds, or until `signal` aborts, whichever is first; never rejects (retry loops' backoff). */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
