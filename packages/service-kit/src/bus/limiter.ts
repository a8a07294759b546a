import { ResourceExhaustedError } from "../errors";

/**
 * Where open-stream counts live. This replica's memory today (`LocalStreamCounter`); a
 * fleet-wide counter (e.g. Redis INCR with a TTL'd key per replica) implements the same two calls.
 */
export interface StreamCounter {
  /** Adds one for `key` unless it already has `limit`; true when added. */
  tryAdd(key: string, limit: number): Promise<boolean>;
  /** Takes one away for `key`. */
  remove(key: string): Promise<void>;
  /** Open streams of `key` now. */
  count(key: string): Promise<number>;
}

/** Counts in this process's memory: the cap holds per replica. */
export class LocalStreamCounter implements StreamCounter {
  readonly #open = new Map<string, number>();

  async tryAdd(key: string, limit: number): Promise<boolean> {
    const open = this.#open.get(key) ?? 0;
    if (open >= limit) return false;
    this.#open.set(key, open + 1);
    return true;
  }

  async remove(key: string): Promise<void> {
    const left = (this.#open.get(key) ?? 1) - 1;
    if (left <= 0) this.#open.delete(key);
    else this.#open.set(key, left);
  }

  async count(key: string): Promise<number> {
    return this.#open.get(key) ?? 0;
  }
}

/** Options of a stream limiter. */
export interface StreamLimiterOptions {
  /** Most open streams per credential key. */
  readonly max: number;
  /** What is limited, for the error message (e.g. "SubscribeActivity streams"). */
  readonly what?: string;
  readonly counter?: StreamCounter;
}

/** Gives a slot back; calling it again does nothing. */
export type ReleaseSlot = () => void;

/** Caps open streams per credential key (see `credentialKey`); RESOURCE_EXHAUSTED past the cap. */
export class StreamLimiter {
  readonly max: number;
  readonly #what: string;
  readonly #counter: StreamCounter;

  constructor(options: StreamLimiterOptions) {
    this.max = options.max;
    this.#what = options.what ?? "streams";
    this.#counter = options.counter ?? new LocalStreamCounter();
  }

  /** Takes a slot for `key`, or throws RESOURCE_EXHAUSTED naming the cap. */
  async acquire(key: string): Promise<ReleaseSlot> {
    if (!(await this.#counter.tryAdd(key, this.max))) {
      throw new ResourceExhaustedError(
        `at most ${this.max} open ${this.#what} per credential; this credential has them all open, close one first`,
      );
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      void this.#counter.remove(key).catch(() => {});
    };
  }

  /** Open streams of `key` now. */
  open(key: string): Promise<number> {
    return this.#counter.count(key);
  }
}
