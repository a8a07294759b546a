import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  StreamCloseReason,
  type SubscribeActivityRequest,
  type SubscribeActivityResponseSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { type CallContext, type Principal, ResourceExhaustedError } from "@unimatrix/service-kit";
import { encodeCursor } from "../cursor";
import type { CubeDeps } from "../deps";
import { READ, requireAccess } from "../store/access";
import { positionOf, scanVisible, toItems, type Viewer, viewerOf, visibleTo } from "../store/activity";
import { sessionUsable } from "../store/identity";
import { uuid } from "../validate";
import { eventOf, type FedItem, type FeedHub, type FeedListener } from "./feed";

type Event = MessageInitShape<typeof SubscribeActivityResponseSchema>;

/** Most open streams per credential (per replica). */
export const MAX_STREAMS_PER_CREDENTIAL = 10;
/** Least time between two access re-checks of one stream, unless an access doorbell rings (revocation also rings one). */
const RECHECK_MS = 5_000;

/**
 * One open stream: its position in the raw activity order, its viewer, and a bounded queue of
 * events waiting for the consumer.
 */
class StreamSink implements FeedListener {
  last: bigint;
  viewer: Viewer;
  live = false;
  dirty = false;
  needCatchUp = false;
  terminal: Event | undefined;
  readonly queue: Event[] = [];
  #wake: (() => void) | undefined;
  #lastCheck = 0;
  #checking = false;
  #recheckAgain = false;
  #held: FedItem[] = [];

  constructor(
    private readonly deps: CubeDeps,
    private readonly principal: Principal,
    readonly cubeId: string,
    start: bigint,
    viewer: Viewer,
    /** The client credential the stream was opened with (a rotation ends the stream). */
    private readonly credentialId?: string,
  ) {
    this.last = start;
    this.viewer = viewer;
    this.#lastCheck = Date.now();
  }

  cursor(): string {
    return encodeCursor(this.cubeId, this.last);
  }

  push(items: readonly FedItem[]): void {
    if (this.terminal) return;
    if (this.#checking) {
      // Access is being re-checked: hold new items so they are filtered with the new viewer.
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
      if (visibleTo(this.viewer, row)) this.queue.push(event);
    }
    if (this.queue.length > this.deps.config.streamMaxBacklog) {
      this.queue.length = 0;
      this.end({
        event: { case: "closed", value: { reason: StreamCloseReason.SLOW_CONSUMER, cursor: this.cursor() } },
      });
    }
    if (Date.now() - this.#lastCheck > RECHECK_MS) this.accessChanged();
    this.signal();
  }

  /** Re-checks access (coalesced); a revoked principal gets `access_revoked` and the end. */
  accessChanged(): void {
    if (this.terminal) return;
    if (this.#checking) {
      this.#recheckAgain = true;
      return;
    }
    this.#checking = true;
    this.#lastCheck = Date.now();
    void this.#recheck().finally(() => {
      this.#checking = false;
      if (this.#recheckAgain) {
        this.#recheckAgain = false;
        this.accessChanged();
        return;
      }
      if (this.#held.length > 0) {
        const held = this.#held;
        this.#held = [];
        this.push(held);
      }
    });
  }

  async #recheck(): Promise<void> {
    const reason = await revokedReason(this.deps, this.principal, this.credentialId).catch(() => undefined);
    if (reason === undefined) return;
    if (reason === null) {
      try {
        const s = await requireAccess(this.deps.prisma, this.principal, this.cubeId, READ, "reading");
        this.viewer = viewerOf(s);
        return;
      } catch {
        this.end({ event: { case: "accessRevoked", value: { reason: "access to the cube was removed" } } });
        return;
      }
    }
    this.end({ event: { case: "accessRevoked", value: { reason } } });
  }

  heartbeat(): void {
    if (this.terminal) return;
    this.queue.push({
      event: { case: "heartbeat", value: { at: timestampFromDate(this.deps.clock.now()), cursor: this.cursor() } },
    });
    if (Date.now() - this.#lastCheck > RECHECK_MS) this.accessChanged();
    this.signal();
  }

  end(event: Event): void {
    if (this.terminal) return;
    this.terminal = event;
    this.signal();
  }

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

/** Why a principal's credential no longer works: a reason, null when it still does, for this stream. */
async function revokedReason(deps: CubeDeps, principal: Principal, credentialId?: string): Promise<string | null> {
  if (principal.kind === "drone-session") {
    return (await sessionUsable(deps, principal.subjectId, deps.clock.now())) ? null : "drone session revoked";
  }
  if (principal.kind === "client") {
    const client = await deps.prisma.apiClient.findUnique({ where: { id: principal.subjectId } });
    if (!client || client.revokedAt) return "client revoked";
    return credentialId !== undefined && client.credentialId !== credentialId ? "client credential rotated" : null;
  }
  return null;
}

/** The SubscribeActivity server stream. */
export function subscribeActivity(deps: CubeDeps, hub: FeedHub) {
  /** Open streams per credential on this replica. */
  const openStreams = new Map<string, number>();
  return async function* (request: SubscribeActivityRequest, ctx: CallContext): AsyncGenerator<Event> {
    const cubeId = uuid("cube_id", request.cubeId);
    const principal = await ctx.principal();
    const s = await requireAccess(deps.prisma, principal, cubeId, READ, "reading");
    const start = request.after === undefined ? BigInt(s.cube.head) : positionOf("after", s, request.after);
    const key = `${principal.kind}:${principal.subjectId}`;
    const open = openStreams.get(key) ?? 0;
    if (open >= MAX_STREAMS_PER_CREDENTIAL)
      throw new ResourceExhaustedError(`at most ${MAX_STREAMS_PER_CREDENTIAL} open streams per credential`);
    openStreams.set(key, open + 1);
    const credentialId =
      principal.kind === "client"
        ? (await deps.prisma.apiClient.findUnique({ where: { id: principal.subjectId } }))?.credentialId
        : undefined;
    const sink = new StreamSink(deps, principal, cubeId, start, viewerOf(s), credentialId);
    const onAbort = () => sink.signal();
    ctx.signal.addEventListener("abort", onAbort);
    const heartbeat = setInterval(() => sink.heartbeat(), deps.config.heartbeatMs);
    heartbeat.unref();
    try {
      await hub.attach(cubeId, sink);
      yield* catchUp(deps, sink);
      yield { event: { case: "ready", value: { cursor: sink.cursor() } } };
      for (;;) {
        await sink.wait(ctx.signal);
        if (ctx.signal.aborted) {
          if (String((ctx.signal.reason as Error | undefined)?.message).includes("shutting down")) {
            yield { event: { case: "closed", value: { reason: StreamCloseReason.SHUTDOWN, cursor: sink.cursor() } } };
          }
          return;
        }
        if (sink.needCatchUp) {
          yield* catchUp(deps, sink);
          continue;
        }
        while (sink.queue.length > 0) yield sink.queue.shift() as Event;
        if (sink.terminal) {
          yield sink.terminal;
          return;
        }
      }
    } finally {
      clearInterval(heartbeat);
      ctx.signal.removeEventListener("abort", onAbort);
      hub.detach(cubeId, sink);
      const left = (openStreams.get(key) ?? 1) - 1;
      if (left <= 0) openStreams.delete(key);
      else openStreams.set(key, left);
    }
  };
}

/** Reads from the database until the stream is level with the log, then lets the feed take over. */
async function* catchUp(deps: CubeDeps, sink: StreamSink): AsyncGenerator<Event> {
  sink.needCatchUp = false;
  sink.live = false;
  for (;;) {
    sink.dirty = false;
    const page = await scanVisible(deps.prisma, sink.cubeId, sink.last, sink.viewer, 500);
    const items = await toItems(deps.prisma, page.rows);
    for (const item of items) yield eventOf(item);
    const moved = page.last !== sink.last;
    sink.last = page.last;
    if (!moved && !page.hasMore) {
      sink.live = true;
      if (!sink.dirty) return;
      sink.live = false;
    }
  }
}
