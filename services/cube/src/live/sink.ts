import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  StreamCloseReason,
  type SubscribeActivityResponseSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import type { Principal } from "@unimatrix/service-kit/auth";
import type { Lag } from "@unimatrix/service-kit/bus";
import type { CubeDeps } from "../deps";
import { subjectsOfAccess } from "../rules/channels";
import { encodeCursor } from "../rules/cursor";
import { type Viewer, visibleTo } from "../rules/visibility";
import type { ActivityListener, FedItem } from "./feed";
import type { AccessRechecks } from "./rechecks";

/** A SubscribeActivity event as a stream yields it. */
export type Event = MessageInitShape<typeof SubscribeActivityResponseSchema>;

/** Least time between two access re-checks of one stream, unless an access doorbell rings (revocation also rings one). */
export const RECHECK_MS = 5_000;

/**
 * When a stream's next periodic re-check is due: RECHECK_MS to twice that from now, spread at
 * random so that streams opened together (a fleet reconnecting, a benchmark's subscribers) do not
 * all query the database on the same delivery.
 */
const nextRecheck = () => Date.now() + RECHECK_MS * (1 + Math.random());

/**
 * One open stream: its position in the raw activity order, its viewer, and a bounded queue of
 * events waiting for the consumer.
 */
export class StreamSink implements ActivityListener {
  last: bigint;
  viewer: Viewer;
  live = false;
  dirty = false;
  needCatchUp = false;
  terminal: Event | undefined;
  readonly queue: Event[] = [];
  /** Writes an event to the call now (kit `CallContext.sendNow`); false when it must be queued. */
  sendNow: ((event: Event) => boolean) | undefined;
  #wake: (() => void) | undefined;
  #nextCheck = 0;
  #checking = false;
  /** Items wait in `#held` until the re-checks in flight end (an access doorbell rang). */
  #holding = false;
  #recheckAgain = false;
  #held: FedItem[] = [];

  constructor(
    private readonly deps: CubeDeps,
    private readonly rechecks: AccessRechecks,
    private readonly principal: Principal,
    readonly cubeId: string,
    start: bigint,
    viewer: Viewer,
    /** The client credential the stream was opened with (a rotation ends the stream). */
    private readonly credentialId?: string,
    /** The consumer asked for `access_changed` events (it serves other principals from this stream). */
    private readonly reportsAccessChanges = false,
  ) {
    this.last = start;
    this.viewer = viewer;
    this.#nextCheck = nextRecheck();
  }

  /** The cursor of the last position this stream passed (sent or filtered out). */
  cursor(): string {
    return encodeCursor(this.cubeId, this.last);
  }

  /** Items from the feed: queued when visible and contiguous; a gap sends the stream back to the database. */
  push(items: readonly FedItem[]): void {
    if (this.terminal) return;
    if (this.#holding) {
      // Access changed and is being re-checked: hold new items so they are filtered with the new viewer.
      this.#held.push(...items);
      return;
    }
    if (!this.live) {
      this.dirty = true;
      return;
    }
    for (const { row, event } of items) {
      if (row.position <= this.last) continue;
      if (row.position !== this.last + 1n) {
        // A gap (this replica's feed started later or skipped): read the rest from the database.
        this.live = false;
        this.needCatchUp = true;
        break;
      }
      this.last = row.position;
      if (!visibleTo(this.viewer, row)) continue;
      // The stream body is parked with nothing queued: write at once instead of resuming it.
      if (this.queue.length === 0 && this.#wake && this.sendNow?.(event)) continue;
      this.queue.push(event);
    }
    if (Date.now() > this.#nextCheck) this.#periodicCheck();
    if (this.queue.length > 0 || this.needCatchUp) this.signal();
  }

  /**
   * A doorbell that is no news (ACCESS) or a bus reconnect: access may have changed, re-check it
   * (and tell a consumer that asked whose: one `access_changed` waits at most, gathering a burst).
   */
  notify(message: string): void {
    if (this.reportsAccessChanges && !this.terminal) {
      // Whose access changed (a reconnect: anyone's, the empty list); one waiting news gathers a burst.
      const subjectIds = subjectsOfAccess(message) ?? [];
      const waiting = this.queue.at(-1)?.event;
      if (waiting?.case === "accessChanged") {
        const known = waiting.value.subjectIds ?? [];
        waiting.value.subjectIds =
          known.length === 0 || subjectIds.length === 0 ? [] : [...new Set([...known, ...subjectIds])];
      } else {
        this.queue.push({ event: { case: "accessChanged", value: { subjectIds } } });
        this.signal();
      }
    }
    this.accessChanged();
  }

  /** What waits for the consumer: the feed cuts this stream past its item budget. */
  lag(): Lag {
    return { items: this.queue.length, bytes: 0 };
  }

  /** Cut by the feed for lagging: drop the backlog and end with `closed{SLOW_CONSUMER}` at the last cursor. */
  cut(): void {
    this.queue.length = 0;
    this.end({ event: { case: "closed", value: { reason: StreamCloseReason.SLOW_CONSUMER, cursor: this.cursor() } } });
  }

  /**
   * Access changed (a doorbell, a bus reconnect): re-checks it (coalesced), holding new items
   * until the check ends so none is filtered with the old viewer; a revoked principal gets
   * `access_revoked` and the end.
   */
  accessChanged(): void {
    if (this.terminal) return;
    this.#holding = true;
    if (this.#checking) {
      this.#recheckAgain = true;
      return;
    }
    this.#startCheck(true);
  }

  /**
   * The periodic re-check (a lost doorbell's safety net): nothing is known to have changed, so
   * items keep flowing with the current viewer meanwhile. Holding them here stalled every
   * stream's deliveries behind a database round trip every RECHECK_MS. It may take the check
   * another stream of the same credential sent less than RECHECK_MS / 2 ago (`AccessRechecks`).
   */
  #periodicCheck(): void {
    if (this.terminal || this.#checking) return;
    this.#startCheck(false);
  }

  /** `fresh`: access changed, the check must read after now (not share one already sent). */
  #startCheck(fresh: boolean): void {
    this.#checking = true;
    this.#nextCheck = nextRecheck();
    void this.#recheck(fresh).finally(() => {
      this.#checking = false;
      if (this.#recheckAgain) {
        this.#recheckAgain = false;
        this.#startCheck(true);
        return;
      }
      this.#holding = false;
      if (this.#held.length > 0) {
        const held = this.#held;
        this.#held = [];
        this.push(held);
      }
    });
  }

  /** One re-check, shared with the replica's other streams of the same principal, credential and cube. */
  async #recheck(fresh: boolean): Promise<void> {
    const found = await this.rechecks.check(this.principal, this.cubeId, this.credentialId, fresh);
    if (found.kind === "viewer") this.viewer = found.viewer;
    else if (found.kind === "revoked") this.end({ event: { case: "accessRevoked", value: { reason: found.reason } } });
  }

  /** Queues a heartbeat carrying the cursor. */
  heartbeat(): void {
    if (this.terminal) return;
    this.queue.push({
      event: { case: "heartbeat", value: { at: timestampFromDate(this.deps.clock.now()), cursor: this.cursor() } },
    });
    if (Date.now() > this.#nextCheck) this.#periodicCheck();
    this.signal();
  }

  /** Ends the stream with a terminal event (after what is queued). */
  end(event: Event): void {
    if (this.terminal) return;
    this.terminal = event;
    this.signal();
  }

  /** Wakes the stream body if it waits. */
  signal(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Resolves when there is something to do (an event, a terminal, a catch-up) or the call ends. */
  wait(signal: AbortSignal): Promise<void> {
    if (this.queue.length > 0 || this.terminal || this.needCatchUp || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }
}
