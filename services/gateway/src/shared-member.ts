import { status } from "@grpc/grpc-js";
import { toStatus } from "@unimatrix/service-kit/grpc";
import type { Followed, FollowOptions } from "./follow";

// One member of a shared upstream (see `SharedUpstreams`): what a kind of shared stream is, how a
// member opens and checks itself, and its own bounded queue.
/**
 * How one kind of upstream stream is shared: what follows it, and the messages the hub makes up
 * itself — the `ready` a late joiner gets (at the hub's position), the close a member that fell
 * too far behind gets (at its own last cursor; the browser reconnects from there), and the
 * `access_revoked` a member whose own access check failed gets.
 */
export interface SharedKind<M> {
  readonly step: FollowOptions<M>["step"];
  /** True for the upstream's ready event (from then on, joiners get a made-up ready). */
  readonly isReady: (message: M) => boolean;
  readonly readyAt: (cursor: string) => M;
  readonly tooSlowAt: (cursor: string | undefined) => M;
  /** The final message of a member whose access check failed. */
  readonly revokedFor: (reason: string) => M;
  /**
   * For the upstream's "access may have changed" news, whose (subject ids; empty: anyone's) — the
   * members it names are checked again before anything further is passed on; undefined for any
   * other message.
   */
  readonly accessNews: (message: M) => readonly string[] | undefined;
  /** True for the upstream's own access_revoked: the member it was opened as lost access, not the others. */
  readonly isRevoked: (message: M) => boolean;
}

/** Opens the upstream after a cursor (undefined: the head) on the shared stream's own signal. May re-authenticate. */
export type SharedOpen<M> = (
  after: string | undefined,
  signal: AbortSignal,
) => AsyncIterable<M> | Promise<AsyncIterable<M>>;

/** One consumer of a shared upstream: how to open the upstream as it, and how to check its own access. */
export interface SharedMember<M> {
  /** Opens the upstream as this member (when it is the one the hub reads as). */
  readonly open: SharedOpen<M>;
  /**
   * Resolves when this member may still read what the upstream reads; rejects with why not.
   * `fresh`: ask the owners again, no cached answer (after access news).
   */
  readonly check: (fresh: boolean) => Promise<void>;
  /** Its credential (a digest): members of one credential are checked once. */
  readonly credential: string;
  /** The ids access news may name it by (`subjectsOf`). */
  readonly subjects: readonly string[];
  /** The shared upstream is waiting to reconnect (the member writes its "reconnecting" comment). */
  readonly onRetry?: (error: unknown) => void;
}

/** Most messages a member may have waiting; past it the member is closed as too slow (never the others). */
export const MEMBER_MAX_QUEUE = 1_000;

/** A check failure that means "no access" (the member's answer), not "could not ask" (keep the member). */
export function deniesAccess(error: unknown): boolean {
  const { code } = toStatus(error);
  return code === status.UNAUTHENTICATED || code === status.PERMISSION_DENIED || code === status.NOT_FOUND;
}

export class Member<M> implements AsyncIterable<Followed<M>> {
  readonly #queue: Followed<M>[] = [];
  #wake: (() => void) | undefined;
  #ended = false;
  #error: unknown;
  #failed = false;
  /** The cursor of the last message handed to the consumer (the position a too-slow close names). */
  sent: string | undefined;

  constructor(
    private readonly kind: SharedKind<M>,
    readonly spec: SharedMember<M>,
    private readonly onLeave: (member: Member<M>) => void,
  ) {}

  get ended(): boolean {
    return this.#ended;
  }

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

  /** Its last message (e.g. access_revoked), after what waits; then the end. */
  finish(message: M): void {
    if (this.#ended) return;
    this.#queue.push({ message, resumed: false });
    this.end();
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
