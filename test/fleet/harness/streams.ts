/** What a long-lived stream delivered, and how often it had to be resumed. */
export interface Delivery {
  /** Identity of the item: an entry id, or `<cursor>/<linked|unlinked>/<machine>` for a transition. */
  readonly key: string;
  readonly cursor: string;
  /** When it arrived (epoch ms). */
  readonly at: number;
}

/** One resumable stream's record: everything it delivered, in arrival order, and its interruptions. */
export class StreamRecord {
  readonly delivered: Delivery[] = [];
  /** Times the stream was opened (1 + reconnects). */
  opens = 0;
  /** Interruptions with their time and reason (`UNAVAILABLE`, `network`, `error event: …`). */
  readonly breaks: { at: number; reason: string }[] = [];
  /** Server-sent `error`/`closed` events after the stream started (the gateway gave up on its upstream). */
  readonly errorEvents: { at: number; text: string }[] = [];
  /** The cursor to resume from. */
  cursor: string;
  /** Times the stream said it was caught up (`ready`). */
  readyCount = 0;
  /** Typed `going_away` events received (a draining replica asked it to resume elsewhere). */
  goingAway = 0;
  /** The drone whose own posts this stream is not sent (an MCP session's seat). */
  ownDroneId: string | undefined;
  /**
   * What a delivery is keyed by until `rekey` maps it to the entry id: `cursor` (an MCP 2026 listen
   * delivers a line and its cursor) or `message` (an MCP 2025 push delivers the line).
   */
  keyedBy: "id" | "cursor" | "message" = "id";

  constructor(
    /** e.g. `sse cube #1 (gateway-A)`. */
    readonly name: string,
    /** The surface: `grpc`, `sse`, `mcp`. */
    readonly surface: string,
    /** What it follows: `activity` or `presence`. */
    readonly topic: "activity" | "presence",
    start: string,
  ) {
    this.cursor = start;
  }

  /** Records one delivered item. */
  deliver(key: string, cursor: string): void {
    this.delivered.push({ key, cursor, at: Date.now() });
    this.cursor = cursor;
  }

  /** Maps its keys to entry ids (`ids`: cursor or message → id); a key it does not know stays (and shows as unexpected). */
  rekey(ids: { readonly cursor: ReadonlyMap<string, string>; readonly message: ReadonlyMap<string, string> }): void {
    if (this.keyedBy === "id") return;
    const map = ids[this.keyedBy];
    const mapped = this.delivered.map((d) => ({ ...d, key: map.get(d.key) ?? d.key }));
    this.delivered.splice(0, this.delivered.length, ...mapped);
    this.keyedBy = "id";
  }

  /** The delivered keys in order. */
  keys(): string[] {
    return this.delivered.map((d) => d.key);
  }
}

/** How a delivered sequence differs from the truth. */
export interface SequenceReport {
  readonly name: string;
  readonly expected: number;
  readonly delivered: number;
  readonly missing: string[];
  readonly duplicates: string[];
  readonly unexpected: string[];
  /** First position where the order differs (after removing missing/duplicate/unexpected), or -1. */
  readonly firstDisorder: number;
  readonly exact: boolean;
}

/** Compares a stream's delivered keys with the truth: exactly once, in order, nothing missing, nothing extra. */
export function compareSequence(name: string, truth: readonly string[], delivered: readonly string[]): SequenceReport {
  const truthSet = new Set(truth);
  const seen = new Set<string>();
  const duplicates: string[] = [];
  const unexpected: string[] = [];
  const firsts: string[] = [];
  for (const key of delivered) {
    if (!truthSet.has(key)) unexpected.push(key);
    else if (seen.has(key)) duplicates.push(key);
    else firsts.push(key);
    seen.add(key);
  }
  const missing = truth.filter((key) => !seen.has(key));
  const kept = truth.filter((key) => seen.has(key));
  let firstDisorder = -1;
  for (let i = 0; i < kept.length; i++) {
    if (kept[i] !== firsts[i]) {
      firstDisorder = i;
      break;
    }
  }
  return {
    name,
    expected: truth.length,
    delivered: delivered.length,
    missing,
    duplicates,
    unexpected,
    firstDisorder,
    exact: missing.length === 0 && duplicates.length === 0 && unexpected.length === 0 && firstDisorder === -1,
  };
}

/** Sleeps (pacing the load, never waiting for a condition). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
