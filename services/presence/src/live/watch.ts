import { type CredentialNewsBoard, credentialKey, type Principal, parseToken } from "@unimatrix/service-kit/auth";
import { type Feed, FeedQueue, type StreamCounter, StreamLimiter } from "@unimatrix/service-kit/bus";
import { ResourceExhaustedError, UnauthenticatedError } from "@unimatrix/service-kit/errors";
import { type CallContext, isShutdown } from "@unimatrix/service-kit/grpc";
import {
  accessRevokedEvent,
  goingAwayEvent,
  readyEvent,
  snapshotEvent,
  transitionEvent,
  type WatchEvent,
  watchHeartbeat,
} from "../convert";
import { rawBearer, type TenantPrincipal } from "../rules/access";
import { PAGE, watchStart } from "../rules/watch";
import type { LogStore } from "../store/log";
import type { MachineStore } from "../store/machines";
import { type FeedCursor, itemSize, type WatchItem } from "./feed";

/** What WatchMachines needs. */
export interface WatchDeps {
  /** This replica's feed of tenant logs (kit Feed over the presence source). */
  readonly feed: Feed<FeedCursor, WatchItem>;
  /** Open WatchMachines streams per credential (kit StreamLimiter, keyed by `credentialKey`). */
  readonly limiter: StreamLimiter;
  readonly logs: LogStore;
  readonly machines: MachineStore;
  readonly heartbeatMs: number;
  readonly maxLagBytes: number;
  /** Re-resolves a foreign bearer token (user/client); null when it no longer authenticates. */
  readonly resolveForeign?: (raw: string) => Promise<Principal | null>;
  /** Credential news: a stream opened with a token re-checks it when the news names its credential. */
  readonly news?: CredentialNewsBoard;
  readonly now: () => Date;
}

/** How a stream re-checks that its credential still authenticates (on drains of revocations, on credential news); true while it does. */
function credentialCheck(principal: TenantPrincipal, ctx: CallContext, deps: WatchDeps) {
  if (principal.kind === "machine") {
    return { onDrain: true, onNews: false, check: () => deps.machines.active(principal.subjectId) };
  }
  const raw = rawBearer(ctx.metadata);
  const resolve = deps.resolveForeign;
  if (raw && resolve && parseToken(raw)) {
    return { onDrain: false, onNews: true, check: async () => (await resolve(raw)) !== null };
  }
  // A gateway-signed principal: the gateway owns that credential's stream and re-checks it.
  return { onDrain: false, onNews: false, check: async () => true };
}

/** The per-credential cap on open WatchMachines streams (per replica), keyed by the kit's `credentialKey`. */
export function watchStreamLimiter(max: number, counter?: StreamCounter): StreamLimiter {
  return new StreamLimiter({ max, what: "WatchMachines streams", ...(counter ? { counter } : {}) });
}

/**
 * A watcher's queue on the feed; a cut also aborts the call, so a write waiting on a stalled
 * consumer gives up. Once the stream is live (`sendNow` set), transitions that find the body
 * parked with nothing queued are written to the call at once instead of resuming it; anything
 * the body must look at first (a revocation count, a write the client has not drained) is queued.
 */
class WatchQueue extends FeedQueue<WatchItem> {
  /** The last sequence number sent: the body and the direct writes both move it. */
  cursor = 0n;
  sendNow: ((message: WatchEvent) => boolean) | undefined;

  constructor(private readonly onCut: () => void) {
    super({ sizeOf: itemSize });
  }

  override push(items: readonly WatchItem[]): void {
    const send = this.sendNow;
    if (!send || !this.parked || this.isCut || items.some((item) => item.kind !== "event")) {
      super.push(items);
      return;
    }
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as WatchItem & { kind: "event" };
      if (item.event.seq <= this.cursor) continue;
      if (!send(item.message)) {
        super.push(items.slice(i));
        return;
      }
      this.cursor = item.event.seq;
    }
  }

  override cut(): void {
    super.cut();
    this.onCut();
  }
}

/**
 * The body of one WatchMachines stream for a checked caller and cursor: snapshot or replay,
 * ready, then live transitions with heartbeats, until the caller leaves, lags or is revoked.
 */
export async function* watchStream(
  deps: WatchDeps,
  principal: TenantPrincipal,
  after: bigint | null,
  ctx: CallContext,
): AsyncGenerator<WatchEvent> {
  const credential = credentialCheck(principal, ctx, deps);
  if (!(await credential.check())) throw new UnauthenticatedError("credential revoked");
  let news = false;
  const release = await deps.limiter.acquire(credentialKey(principal));
  const tenantId = principal.tenantId;
  const queue = new WatchQueue(() => ctx.abort(new Error("watcher too far behind")));
  const tooSlow = () =>
    new ResourceExhaustedError(
      `consumer is more than ${deps.maxLagBytes} bytes behind; reconnect with the last cursor`,
    );
  let ticks = 0;
  let timer: NodeJS.Timeout | undefined;
  let unwatch: (() => void) | undefined;
  try {
    // Attached first: from here on the feed queues every event after its cursor, and the
    // database reads below cover everything up to (at least) that cursor.
    await deps.feed.attach(tenantId, queue);
    unwatch =
      credential.onNews && deps.news
        ? deps.news.watch(principal, () => {
            news = true;
            queue.poke();
          })
        : undefined;
    timer = setInterval(() => {
      ticks += 1;
      queue.poke();
    }, deps.heartbeatMs);

    // 1. Where to start: a snapshot, or the given cursor if it can be resumed.
    let revocations: bigint;
    const resumable = after !== null ? await deps.logs.state(tenantId) : null;
    const start = watchStart(after, resumable ?? { floor: 0n, head: 0n });
    if (!start.snapshot && resumable) {
      queue.cursor = start.cursor;
      revocations = resumable.revocations;
    } else {
      const snapshot = await deps.logs.snapshot(tenantId);
      yield snapshotEvent(snapshot.head, start.snapshot && start.reset, snapshot.items);
      queue.cursor = snapshot.head;
      revocations = snapshot.revocations;
    }

    // 2. Backlog from the database in sequence order, in pages, up to what is committed now; then ready.
    for (;;) {
      const page = await deps.logs.page(tenantId, queue.cursor, PAGE);
      for (const event of page.events) {
        if (queue.isCut) throw tooSlow();
        yield transitionEvent(event);
        queue.cursor = event.seq;
      }
      if (page.events.length < PAGE) break;
    }
    yield readyEvent(queue.cursor);
    // From here the feed's transitions may go to the call directly while this body waits.
    queue.sendNow = ctx.sendNow;

    // 3. Live: what the feed pushed (events already sent are skipped), a heartbeat on every tick.
    for (;;) {
      if (queue.isCut) throw tooSlow();
      await queue.wait(ctx.signal);
      if (queue.isCut) throw tooSlow();
      if (ctx.signal.aborted) {
        // The replica drained and is stopping: the typed "reconnect with your cursor".
        if (isShutdown(ctx.signal)) yield goingAwayEvent(queue.cursor);
        return;
      }
      const items = queue.take();
      queue.notices(); // every well-formed doorbell is news: notices carry nothing to act on
      const tick = ticks > 0;
      ticks = 0;
      let recheck = tick || news;
      news = false;
      for (const item of items) {
        if (item.kind !== "revocations" || item.revocations === revocations) continue;
        revocations = item.revocations;
        recheck ||= credential.onDrain;
      }
      if (recheck && !(await credential.check())) {
        yield accessRevokedEvent();
        return;
      }
      if (tick) yield watchHeartbeat(deps.now());
      for (const item of items) {
        if (item.kind !== "event" || item.event.seq <= queue.cursor) continue;
        if (queue.isCut) throw tooSlow();
        yield item.message;
        queue.cursor = item.event.seq;
      }
    }
  } finally {
    unwatch?.();
    clearInterval(timer);
    deps.feed.detach(tenantId, queue);
    release();
  }
}
