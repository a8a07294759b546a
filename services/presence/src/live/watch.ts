import {
  type CallContext,
  type Principal,
  parseToken,
  ResourceExhaustedError,
  UnauthenticatedError,
} from "@unimatrix/service-kit";
import {
  accessRevokedEvent,
  readyEvent,
  snapshotEvent,
  transitionEvent,
  type WatchEvent,
  watchHeartbeat,
} from "../convert";
import { credentialKey, rawBearer, type TenantPrincipal } from "../rules/access";
import { PAGE, watchStart } from "../rules/watch";
import type { LogStore } from "../store/log";
import type { MachineStore } from "../store/machines";
import type { PresenceEvent } from "../store/rows";
import type { TenantFeed, WatchHub } from "./feed";
import type { StreamLimiter } from "./limiter";
import { Mailbox } from "./mailbox";

/** What WatchMachines needs. */
export interface WatchDeps {
  readonly hub: WatchHub;
  /** Open WatchMachines streams per credential. */
  readonly limiter: StreamLimiter;
  readonly logs: LogStore;
  readonly machines: MachineStore;
  readonly heartbeatMs: number;
  readonly maxLagBytes: number;
  /** Re-resolves a foreign bearer token (user/client); null when it no longer authenticates. */
  readonly resolveForeign?: (raw: string) => Promise<Principal | null>;
  readonly now: () => Date;
}

type Wake = "wake" | "tick" | "abort" | "cut";

/** How a stream re-checks that its credential still authenticates; true while it does. */
function credentialCheck(principal: TenantPrincipal, ctx: CallContext, deps: WatchDeps) {
  if (principal.kind === "machine") {
    return { onDrain: true, check: () => deps.machines.active(principal.subjectId) };
  }
  const raw = rawBearer(ctx.metadata);
  const resolve = deps.resolveForeign;
  if (raw && resolve && parseToken(raw)) {
    return { onDrain: false, check: async () => (await resolve(raw)) !== null };
  }
  // A gateway-signed principal: the gateway owns that credential's stream and re-checks it.
  return { onDrain: false, check: async () => true };
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
  const release = deps.limiter.reserve(credentialKey(principal, ctx.metadata));
  const tenantId = principal.tenantId;
  const mailbox = new Mailbox<Wake>();
  let feed: TenantFeed | undefined;
  let timer: NodeJS.Timeout | undefined;
  const onAbort = () => mailbox.push("abort");
  const state = { cursor: 0n, live: false, cut: false, wakeQueued: false };
  const watcher = {
    get cursor() {
      return state.cursor;
    },
    get live() {
      return state.live;
    },
    // One queued wake is enough: the drain it causes reads everything there is.
    wake: () => {
      if (state.wakeQueued) return;
      state.wakeQueued = true;
      mailbox.push("wake");
    },
    cut: () => {
      if (state.cut) return;
      state.cut = true;
      mailbox.push("cut");
      // A consumer that stopped reading keeps the writer waiting: wake it so the stream can end.
      ctx.abort(new Error("watcher too far behind"));
    },
  };
  const tooSlow = () =>
    new ResourceExhaustedError(
      `consumer is more than ${deps.maxLagBytes} bytes behind; reconnect with the last cursor`,
    );
  try {
    feed = await deps.hub.acquire(tenantId);
    feed.watchers.add(watcher);
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    timer = setInterval(() => mailbox.push("tick"), deps.heartbeatMs);
    let revocations: bigint;
    let target: bigint;

    // 1. Where to start: a snapshot, or the given cursor if it can be resumed.
    const resumable = after !== null ? await deps.logs.state(tenantId) : null;
    const start = watchStart(after, resumable ?? { floor: 0n, head: 0n });
    if (!start.snapshot && resumable) {
      state.cursor = start.cursor;
      target = resumable.head;
      revocations = resumable.revocations;
    } else {
      const snapshot = await deps.logs.snapshot(tenantId);
      yield snapshotEvent(snapshot.head, start.snapshot && start.reset, snapshot.items);
      state.cursor = snapshot.head;
      target = snapshot.head;
      revocations = snapshot.revocations;
    }
    // The window must hold what was committed before this call, so ready follows all of it.
    if (feed.cursor < target) await feed.poke();

    // 2. Backlog in sequence order, in pages; then ready.
    const next = async (): Promise<PresenceEvent[]> => {
      const windowed = feed?.after(state.cursor, PAGE);
      if (windowed) return windowed;
      const page = await deps.logs.page(tenantId, state.cursor, PAGE);
      return page.events;
    };
    for (;;) {
      const events = await next();
      for (const event of events) {
        yield transitionEvent(event);
        state.cursor = event.seq;
      }
      if (events.length < PAGE) break;
    }
    yield readyEvent(state.cursor);
    state.live = true;
    void feed.poke().catch(() => {});

    // 3. Live: drain on every doorbell, heartbeat on every tick.
    for (;;) {
      if (state.cut) throw tooSlow();
      const wake = await mailbox.take();
      if (wake === "wake") state.wakeQueued = false;
      if (state.cut || wake === "cut") throw tooSlow();
      if (wake === "abort") return;
      let recheck = false;
      if (wake === "tick") {
        recheck = true;
        void feed.poke().catch(() => {});
      }
      if (feed.state.revocations !== revocations) {
        revocations = feed.state.revocations;
        recheck ||= credential.onDrain;
      }
      if (recheck && !(await credential.check())) {
        yield accessRevokedEvent();
        return;
      }
      if (wake === "tick") {
        yield watchHeartbeat(deps.now());
        continue;
      }
      for (;;) {
        const events = await next();
        for (const event of events) {
          if (state.cut) throw tooSlow();
          yield transitionEvent(event);
          state.cursor = event.seq;
        }
        if (events.length < PAGE) break;
      }
    }
  } finally {
    clearInterval(timer);
    ctx.signal.removeEventListener("abort", onAbort);
    if (feed) {
      feed.watchers.delete(watcher);
      await deps.hub.release(tenantId);
    }
    release();
  }
}
