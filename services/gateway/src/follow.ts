import { status } from "@grpc/grpc-js";
import { sleep } from "@unimatrix/service-kit/clock";
import { toStatus } from "@unimatrix/service-kit/grpc";

/** What one upstream event means for resuming. */
export interface Step {
  /** The position to resume after once this event has been passed on. */
  readonly cursor?: string | undefined;
  /** A start position (ready, heartbeat): adopted only while nothing has been passed on yet. */
  readonly start?: string | undefined;
  /** The stream is over for good (revoked, closed for a reason other than going away). */
  readonly final?: boolean;
  /** The replica is going away: resume elsewhere from the cursor. */
  readonly goingAway?: boolean;
}

/** How to follow one upstream stream across replicas. */
export interface FollowOptions<M> {
  /** Opens the upstream stream after `after` (undefined: from the head). May re-authenticate. */
  readonly open: (after: string | undefined) => AsyncIterable<M> | Promise<AsyncIterable<M>>;
  /** Where to start; undefined = the head. */
  readonly after: string | undefined;
  readonly step: (message: M) => Step;
  /** Ends the follow (the client went away). */
  readonly signal: AbortSignal;
  /** Told before each wait to reconnect (with the error, if the stream failed rather than ended). */
  readonly onRetry?: (error: unknown) => void;
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

/** One event passed on, and whether it came from a re-opened (resumed) upstream stream. */
export interface Followed<M> {
  readonly message: M;
  readonly resumed: boolean;
}

/**
 * True for a failure that means "this replica (or the path to it) went away": UNAVAILABLE,
 * CANCELLED by the server side, a reset stream. Anything else (permission, not found, limits)
 * is the answer and ends the follow.
 */
export function isGoingAway(error: unknown): boolean {
  const { code } = toStatus(error);
  if (code === status.UNAVAILABLE || code === status.CANCELLED) return true;
  return code === status.INTERNAL && /RST_STREAM|Connection dropped|ECONNRESET/i.test(String((error as Error).message));
}

/**
 * Follows an upstream server stream that outlives its replica: when the stream fails with a
 * going-away error, ends with the typed going-away event, or simply ends without a final event,
 * it is re-opened after the last cursor passed on (capped exponential backoff with jitter), so the
 * consumer sees every event once and in order. Throws the first error that is not going-away.
 */
export async function* follow<M>(options: FollowOptions<M>): AsyncGenerator<Followed<M>> {
  const { signal } = options;
  const initial = options.initialBackoffMs ?? 100;
  const max = options.maxBackoffMs ?? 2_000;
  let after = options.after;
  let passedOn = options.after !== undefined;
  let resumed = false;
  let backoff = initial;
  while (!signal.aborted) {
    let failure: unknown;
    try {
      const stream = await options.open(after);
      for await (const message of stream) {
        backoff = initial;
        const step = options.step(message);
        if (step.start !== undefined && !passedOn) after = step.start;
        yield { message, resumed };
        if (step.cursor !== undefined) {
          after = step.cursor;
          passedOn = true;
        }
        if (step.final) return;
        if (step.goingAway) break;
      }
    } catch (error) {
      if (signal.aborted) return;
      if (!isGoingAway(error)) throw error;
      failure = error;
    }
    if (signal.aborted) return;
    options.onRetry?.(failure);
    await sleep(backoff * (0.5 + Math.random() / 2), signal);
    backoff = Math.min(backoff * 2, max);
    resumed = true;
  }
}
