/** Reconnect delays: exponential with full jitter, reset once a link has held. */
export interface BackoffOptions {
  /** First delay ceiling (ms). */
  readonly baseMs?: number;
  /** Largest delay ceiling (ms). */
  readonly maxMs?: number;
  /** A number in [0, 1); the seam tests use to make jitter predictable. */
  readonly random?: () => number;
}

/**
 * The delay before reconnect attempt `attempt` (0 = the first retry): a uniform draw from
 * [ceiling / 2, ceiling], where the ceiling doubles per attempt from `baseMs` up to `maxMs`.
 * Half the ceiling stays fixed so a fleet of daemons never retries in a tight loop, the other
 * half is jitter so they do not retry in step after a replica dies.
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? 250;
  const max = options.maxMs ?? 30_000;
  const random = options.random ?? Math.random;
  const ceiling = Math.min(max, base * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}
