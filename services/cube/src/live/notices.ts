import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { WatchNoticesResponseSchema } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import { BUS_DOWN_POLL_MS } from "@unimatrix/service-kit/bus";
import { type CallContext, isShutdown } from "@unimatrix/service-kit/grpc";
import { noticeToWire } from "../convert";
import type { CubeDeps } from "../deps";
import type { MachineCaller } from "../rules/access";
import { noticeChannel } from "../rules/channels";
import { pendingNotices } from "../tables/notices";

/** Notices read per pass (a machine with more pending gets the rest after it confirms some). */
const NOTICE_PAGE = 500;
/** While the bus is up, a watch still re-reads this often (a lost doorbell, an out-of-order commit). */
const NOTICE_HEAL_MS = 5_000;

type Event = MessageInitShape<typeof WatchNoticesResponseSchema>;

/** A one-slot wake-up: `ring` from anywhere, `wait` in the stream's loop. */
class Wakeup {
  #rung = false;
  #resolve: (() => void) | undefined;
  ring(): void {
    this.#rung = true;
    this.#resolve?.();
  }
  async wait(): Promise<void> {
    if (!this.#rung) await new Promise<void>((resolve) => (this.#resolve = resolve));
    this.#resolve = undefined;
    this.#rung = false;
  }
}

/**
 * The WatchNotices body for one machine: every unconfirmed notice, oldest first, each once per
 * stream; then new ones as they are queued. Woken by the machine's doorbell (`notices:<machine>`),
 * a bus reconnect, and a poll (every 5 s, every second while the bus is down); a heartbeat every
 * `CUBE_STREAM_HEARTBEAT_MS`; `going_away` when the replica drains. Each pass reads the pending
 * set again (not "after a cursor"), so a notice committed out of queue order is still sent, and a
 * notice confirmed on another stream is simply no longer read.
 */
export async function* watchNotices(deps: CubeDeps, caller: MachineCaller, ctx: CallContext): AsyncGenerator<Event> {
  const wakeup = new Wakeup();
  let beat = false;
  const subscription = await deps.bus.subscribe(noticeChannel(caller.machineId), () => wakeup.ring());
  const offReconnect = deps.bus.onReconnect(() => wakeup.ring());
  const onAbort = () => wakeup.ring();
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  let lastRead = 0;
  const poll = setInterval(() => {
    const every = deps.bus.healthy() ? NOTICE_HEAL_MS : BUS_DOWN_POLL_MS;
    if (performance.now() - lastRead >= every) wakeup.ring();
  }, BUS_DOWN_POLL_MS);
  const heartbeat = setInterval(() => {
    beat = true;
    wakeup.ring();
  }, deps.config.heartbeatMs);
  poll.unref();
  heartbeat.unref();
  /** Ids sent on this stream and (as far as the last full read knows) still unconfirmed. */
  let sent = new Set<string>();
  try {
    for (;;) {
      if (ctx.signal.aborted) {
        if (isShutdown(ctx.signal)) yield { event: { case: "goingAway", value: {} } };
        return;
      }
      lastRead = performance.now();
      const pending = await pendingNotices(deps.fast, caller.tenantId, caller.machineId, NOTICE_PAGE);
      for (const notice of pending) {
        if (sent.has(notice.id)) continue;
        sent.add(notice.id);
        yield { event: { case: "notice", value: noticeToWire(notice) } };
      }
      // A complete read: forget ids that are no longer pending (confirmed), so the set stays small.
      if (pending.length < NOTICE_PAGE) sent = new Set(pending.map((n) => n.id));
      if (beat) {
        beat = false;
        yield { event: { case: "heartbeat", value: { at: timestampFromDate(deps.clock.now()) } } };
      }
      await wakeup.wait();
    }
  } finally {
    clearInterval(poll);
    clearInterval(heartbeat);
    ctx.signal.removeEventListener("abort", onAbort);
    offReconnect();
    await subscription.unsubscribe().catch(() => {});
  }
}
