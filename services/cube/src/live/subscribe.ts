import type {
  SubscribeActivityRequest,
  SubscribeActivityResponse,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { credentialKey } from "@unimatrix/service-kit/auth";
import { type StreamCounter, StreamLimiter } from "@unimatrix/service-kit/bus";
import { UnauthenticatedError } from "@unimatrix/service-kit/errors";
import { type CallContext, isShutdown } from "@unimatrix/service-kit/grpc";
import { requireUuid } from "@unimatrix/service-kit/rules";
import { eventOf } from "../convert";
import type { CubeDeps } from "../deps";
import { runOp } from "../effects";
import { noteWait } from "../ops/note-read";
import { streamStart } from "../reads/activity";
import { revokedReason, streamCredential } from "../reads/credentials";
import { READ } from "../rules/access";
import { encodeCursor } from "../rules/cursor";
import { viewerOf } from "../rules/visibility";
import { requireAccess } from "../store/access";
import { floorOf, loadItems, scanVisible } from "../tables/entries";
import type { DeliveryRecorder } from "./deliveries";
import type { ActivityFeed } from "./feed";
import { AccessRechecks } from "./rechecks";
import { type Event, RECHECK_MS, StreamSink } from "./sink";

/** Most open streams per credential (`credentialKey`: a drone session counts against its client), fleet-wide. */
const MAX_STREAMS_PER_CREDENTIAL = 10;

/**
 * The SubscribeActivity server stream. Open streams per credential are counted by `counter`
 * (fleet-wide in Redis from the service wiring; this replica's memory by default).
 */
export function subscribeActivity(
  deps: CubeDeps,
  feed: ActivityFeed,
  counter?: StreamCounter,
  deliveries?: DeliveryRecorder,
): (request: SubscribeActivityRequest, ctx: CallContext) => AsyncGenerator<Event> {
  const limiter = new StreamLimiter({ max: MAX_STREAMS_PER_CREDENTIAL, what: "SubscribeActivity streams", counter });
  // A periodic re-check takes one its credential's other streams sent less than half the period ago.
  const rechecks = new AccessRechecks(deps, RECHECK_MS / 2);
  return async function* (request: SubscribeActivityRequest, ctx: CallContext): AsyncGenerator<Event> {
    const cubeId = requireUuid("cube_id", request.cubeId);
    const principal = await ctx.principal();
    const s = await requireAccess(deps.prisma, principal, cubeId, READ, "reading");
    const start = request.after === undefined ? BigInt(s.cube.head) : streamStart("after", s, request.after);
    // Opening a stream is a drone's activity (MCP log_wait opens one per wait): it renews its claims.
    await runOp(deps, noteWait(deps, principal));
    // A principal resolved from a credential since rotated or revoked (an edge that has not heard
    // the news yet, or heard it while the bus was down) opens nothing: the reconnect is refused.
    const credentialId = principal.credentialId ?? (await streamCredential(deps, principal));
    if (principal.credentialId !== undefined) {
      const reason = await revokedReason(deps, principal, credentialId);
      if (reason) throw new UnauthenticatedError(reason);
    }
    const release = await limiter.acquire(credentialKey(principal));
    const sink = new StreamSink(
      deps,
      rechecks,
      principal,
      cubeId,
      start,
      viewerOf(s),
      credentialId,
      request.accessChanges,
    );
    const onAbort = () => sink.signal();
    ctx.signal.addEventListener("abort", onAbort);
    const heartbeat = setInterval(() => sink.heartbeat(), deps.config.heartbeatMs);
    // A drone's stream records what it sent as `delivered` receipts (batched, off the stream's path).
    const droneId = principal.kind === "drone-session" ? principal.droneId : undefined;
    const sent = (event: Event): Event => {
      if (droneId && deliveries) deliveries.sent(droneId, event as Pick<SubscribeActivityResponse, "event">);
      return event;
    };
    heartbeat.unref();
    // A live stream's events go to the call at once, without resuming this body (kit `sendNow`).
    const sendNow = ctx.sendNow;
    if (sendNow)
      sink.sendNow = (event) => {
        if (!sendNow(event)) return false;
        sent(event);
        return true;
      };
    try {
      await feed.attach(cubeId, sink);
      for await (const event of catchUp(deps, sink)) yield sent(event);
      yield { event: { case: "ready", value: { cursor: sink.cursor() } } };
      for (;;) {
        await sink.wait(ctx.signal);
        if (ctx.signal.aborted) {
          // The replica drained and is stopping: the typed "reconnect with your cursor".
          if (isShutdown(ctx.signal)) yield { event: { case: "goingAway", value: { cursor: sink.cursor() } } };
          return;
        }
        if (sink.needCatchUp) {
          for await (const event of catchUp(deps, sink)) yield sent(event);
          continue;
        }
        while (sink.queue.length > 0) yield sent(sink.queue.shift() as Event);
        if (sink.terminal) {
          yield sink.terminal;
          return;
        }
      }
    } finally {
      clearInterval(heartbeat);
      ctx.signal.removeEventListener("abort", onAbort);
      feed.detach(cubeId, sink);
      release();
    }
  };
}

/**
 * Reads from the database until the stream is level with the log, then lets the feed take over.
 * A stream behind the cube's retained floor (it resumed from an expired cursor, or retention
 * passed it while it caught up) gets `reset{floor cursor}` and goes on after the floor.
 */
async function* catchUp(deps: CubeDeps, sink: StreamSink): AsyncGenerator<Event> {
  sink.needCatchUp = false;
  sink.live = false;
  for (;;) {
    sink.dirty = false;
    const page = await scanVisible(deps.prisma, sink.cubeId, sink.last, sink.viewer, 500);
    // Read after the scan: retention raises the floor before it deletes, so a floor past
    // `sink.last` now means this page may have holes (and rows under the floor are not the stream's).
    const floor = await floorOf(deps.prisma, sink.cubeId);
    if (floor > sink.last) {
      sink.last = floor;
      yield { event: { case: "reset", value: { cursor: encodeCursor(sink.cubeId, floor) } } };
      continue;
    }
    const items = await loadItems(deps.prisma, page.rows);
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
