import { createHash } from "node:crypto";
import { type Followed, type FollowOptions, follow } from "./follow";

/**
 * How one kind of upstream stream is shared: what follows it, and the two messages the hub makes
 * up itself — the `ready` a late joiner gets (at the hub's position) and the close a member that
 * fell too far behind gets (at its own last cursor; the browser reconnects from there).
 */
export interface SharedKind<M> {
  readonly step: FollowOptions<M>["step"];
  /** True for the upstream's ready event (from then on, joiners get a made-up ready). */
  readonly isReady: (message: M) => boolean;
  readonly readyAt: (cursor: string) => M;
  readonly tooSlowAt: (cursor: string | undefined) => M;
}

/** Opens the upstream after a cursor (undefined: the head) on the shared stream's own signal. May re-authenticate. */
export type SharedOpen<M> = (
  after: string | undefined,
  signal: AbortSignal,
) => AsyncIterable<M> | Promise<AsyncIterable<M>>;

/** What a member is told besides messages. */
export interface MemberHooks {
  /** The shared upstream is waiting to reconnect (the member writes its "reconnecting" comment). */
  readonly onRetry?: (error: unknown) => void;
}

/** Counters of one replica's shared upstreams (metrics and tests). */
export interface SharedUpstreamStats {
  /** Upstream streams open now. */
  readonly upstreams: number;
  /** Consumers attached to them now. */
  readonly members: number;
  /** Upstream streams opened since start (a failover's re-open is not counted, a new hub is). */
  readonly opened: number;
}

/** Most messages a member may have waiting; past it the member is closed as too slow (never the others). */
export const MEMBER_MAX_QUEUE = 1_000;

/** The sharing key of an upstream: what it reads and the exact credential it reads as (a digest, never the token). */
export function sharingKey(what: string, authorization: string): string {
  return `${what}|${createHash("sha256").update(authorization).digest("base64url")}`;
}

class Member<M> implements AsyncIterable<Followed<M>> {
  readonly #queue: Followed<M>[] = [];
  #wake: (() => void) | undefined;
  #ended = false;
  #error: unknown;
  #failed = false;
  /** The cursor of the last message handed to the consumer (the position a too-slow close names). */
  sent: string | undefined;

  constructor(
    private readonly kind: SharedKind<M>,
    readonly hooks: MemberHooks,
    private readonly onLeave: (member: Member<M>) => void,
  ) {}

  push(item: Followed<M>): void {
    if (this.#ended) return;
    if (this.#queue.length >= MEMBER_MAX_QUEUE) {
      // Too slow for the shared stream: drop what waits and close at the last cursor it sent.
      this.#queue.length = 0;
      this.#queue.push({ message: this.kind.tooSlowAt(this.sent), resumed: false });
      this.end();
      return;
    }
    this.#queue.push(item);
    this.#signal();
  }

  end(): void {
    this.#ended = true;
    this.#signal();
  }

  fail(error: unknown): void {
    if (this.#ended) return;
    this.#failed = true;
    this.#error = error;
    this.end();
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Followed<M>> {
    try {
      for (;;) {
        const next = this.#queue.shift();
        if (next) {
          // Handed over = sent: the consumer writes what it is given before it asks for more.
          const cursor = this.kind.step(next.message).cursor;
          if (cursor !== undefined) this.sent = cursor;
          yield next;
          continue;
        }
        if (this.#ended) {
          if (this.#failed) throw this.#error;
          return;
        }
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
      }
    } finally {
      this.#ended = true;
      this.onLeave(this);
    }
  }
}

class Hub<M> {
  readonly members = new Set<Member<M>>();
  readonly controller = new AbortController();
  /** Set once the upstream's ready passed: later joiners start from `position` with a made-up ready. */
  live = false;
  /** The position of the last message passed on (entry cursor, or the ready/heartbeat position). */
  position: string | undefined;
  /** No new member may join: the stream is over (final event, error, or no members left). */
  closed = false;

  constructor(
    private readonly kind: SharedKind<M>,
    open: SharedOpen<M>,
    private readonly onClose: () => void,
  ) {
    void this.#run((after) => open(after, this.controller.signal));
  }

  join(hooks: MemberHooks, signal: AbortSignal): Member<M> {
    const member = new Member<M>(this.kind, hooks, (m) => this.#leave(m));
    if (this.live && this.position !== undefined)
      member.push({ message: this.kind.readyAt(this.position), resumed: false });
    this.members.add(member);
    // A consumer that goes away leaves at once, whether or not it is reading.
    const leave = () => {
      member.end();
      this.#leave(member);
    };
    if (signal.aborted) leave();
    else signal.addEventListener("abort", leave, { once: true });
    return member;
  }

  #leave(member: Member<M>): void {
    this.members.delete(member);
    if (this.members.size === 0) this.#close();
  }

  #close(): void {
    if (this.closed) return;
    this.closed = true;
    this.controller.abort();
    this.onClose();
  }

  async #run(open: FollowOptions<M>["open"]): Promise<void> {
    try {
      const followed = follow({
        open,
        after: undefined,
        step: this.kind.step,
        signal: this.controller.signal,
        onRetry: (error) => {
          for (const member of this.members) member.hooks.onRetry?.(error);
        },
      });
      for await (const item of followed) {
        const step = this.kind.step(item.message);
        if (step.final) this.#close();
        this.position = step.cursor ?? step.start ?? this.position;
        if (this.kind.isReady(item.message)) this.live = true;
        for (const member of this.members) member.push(item);
      }
      for (const member of this.members) member.end();
    } catch (error) {
      for (const member of this.members) member.fail(error);
    } finally {
      this.#close();
    }
  }
}

/**
 * One gateway replica's shared upstream subscriptions: streams that read the same thing from the
 * head as the same credential (e.g. a console's tabs, an agent's several SSE readers) share one
 * upstream server stream, followed across replica failover (`follow`), and every message is
 * handed to each member once, in order. A member that falls `MEMBER_MAX_QUEUE` messages behind is
 * closed as too slow at its last cursor (it reconnects with it and resumes on a stream of its own),
 * so a slow reader never holds the others back. A stream that resumes from a cursor does not
 * share: its position is its own. Exported for MCP push as well as SSE.
 */
export class SharedUpstreams {
  readonly #hubs = new Map<string, Hub<unknown>>();
  #opened = 0;

  /**
   * The messages of the upstream `key` from now on (the first joiner opens it with `open`; a
   * joiner after its ready gets a ready at the current position first). Ends when the upstream
   * ends or `signal` aborts; throws the upstream's error.
   */
  join<M>(
    key: string,
    kind: SharedKind<M>,
    open: SharedOpen<M>,
    signal: AbortSignal,
    hooks: MemberHooks = {},
  ): AsyncIterable<Followed<M>> {
    let hub = this.#hubs.get(key) as Hub<M> | undefined;
    if (!hub || hub.closed) {
      this.#opened += 1;
      const created: Hub<M> = new Hub<M>(kind, open, () => {
        if (this.#hubs.get(key) === (created as Hub<unknown>)) this.#hubs.delete(key);
      });
      hub = created;
      this.#hubs.set(key, hub as Hub<unknown>);
    }
    return hub.join(hooks, signal);
  }

  stats(): SharedUpstreamStats {
    let members = 0;
    for (const hub of this.#hubs.values()) members += hub.members.size;
    return { upstreams: this.#hubs.size, members, opened: this.#opened };
  }
}
