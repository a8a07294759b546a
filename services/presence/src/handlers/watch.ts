import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { WatchMachinesRequest } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import {
  type CallContext,
  credentialKey,
  InvalidArgumentError,
  isShutdown,
  type Principal,
  parseToken,
  ResourceExhaustedError,
  UnauthenticatedError,
} from "@unimatrix/service-kit";
import type { TenantFeed, WatchHub } from "../live/feed";
import { Mailbox } from "../live/mailbox";
import type { LogStore } from "../store/log";
import type { MachineStore } from "../store/machines";
import type { PresenceEvent } from "../store/rows";
import { rawBearer, requireTenant, type TenantPrincipal } from "./access";
import { snapshotEvent, transitionEvent, type WatchEvent } from "./convert";

/** What WatchMachines needs. */
export interface WatchDeps {
  readonly hub: WatchHub;
  readonly logs: LogStore;
  readonly machines: MachineStore;
  readonly heartbeatMs: number;
  readonly maxLagBytes: number;
  /** Re-resolves a foreign bearer token (user/client); null when it no longer authenticates. */
  readonly resolveForeign?: (raw: string) => Promise<Principal | null>;
  readonly now: () => Date;
}

const PAGE = 256;
const MAX_CURSOR = 9223372036854775807n;

/**
 * The resume cursor of a request: null for none, or a non-negative integer. A value too large
 * for the sequence is simply above the head (a reset snapshot), not an error.
 */
export function parseCursor(after: string): bigint | null {
  if (after === "") return null;
  if (!/^[0-9]+$/.test(after)) throw new InvalidArgumentError("after", "must be a non-negative decimal integer");
  const value = BigInt(after);
  return value > MAX_CURSOR ? MAX_CURSOR : value;
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

/** WatchMachines: snapshot or replay, ready, then live transitions with heartbeats. */
export function watchMachinesHandler(deps: WatchDeps) {
  return async function* watchMachines(request: WatchMachinesRequest, ctx: CallContext): AsyncIterable<WatchEvent> {
    const principal = requireTenant(await ctx.principal(), ["user", "client", "machine"]);
    const after = parseCursor(request.after);
    const credential = credentialCheck(principal, ctx, deps);
    if (!(await credential.check())) throw new UnauthenticatedError("credential revoked");
    const release = await deps.hub.reserveStream(credentialKey(principal));
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
      if (after === null || !resumable || after < resumable.floor || after > resumable.head) {
        const snapshot = await deps.logs.snapshot(tenantId);
        yield snapshotEvent(snapshot.head, after !== null, snapshot.items);
        state.cursor = snapshot.head;
        target = snapshot.head;
        revocations = snapshot.revocations;
      } else {
        state.cursor = after;
        target = resumable.head;
        revocations = resumable.revocations;
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
      yield { event: { case: "machineReady", value: { cursor: state.cursor.toString() } } };
      state.live = true;
      void feed.poke().catch(() => {});

      // 3. Live: drain on every doorbell, heartbeat on every tick.
      for (;;) {
        if (state.cut) throw tooSlow();
        const wake = await mailbox.take();
        if (wake === "wake") state.wakeQueued = false;
        if (state.cut || wake === "cut") throw tooSlow();
        if (wake === "abort") {
          // The replica drained and is stopping: the typed "reconnect with your cursor".
          if (isShutdown(ctx.signal))
            yield { event: { case: "goingAway", value: { cursor: state.cursor.toString() } } };
          return;
        }
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
          yield { event: { case: "accessRevoked", value: {} } };
          return;
        }
        if (wake === "tick") {
          yield { event: { case: "heartbeat", value: { at: timestampFromDate(deps.now()) } } };
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
  };
}
