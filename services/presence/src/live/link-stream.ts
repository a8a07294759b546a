import { randomUUID } from "node:crypto";
import { status as grpcStatus } from "@grpc/grpc-js";
import type { Notice } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import { LinkCloseReason, type LinkRequest } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { Clock } from "@unimatrix/service-kit/clock";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { type CallContext, isShutdown } from "@unimatrix/service-kit/grpc";
import {
  closedResponse as closed,
  goingAwayResponse,
  type LinkResponse,
  linkedResponse,
  linkHeartbeat,
  noticeResponse,
  sessionBoundResponse,
} from "../convert";
import type { TenantPrincipal } from "../rules/access";
import { heartbeatMissed, heartbeatSeconds, validateHello, validateLater } from "../rules/link";
import type { LinkHandle, LinkRegistry } from "./links";
import { Mailbox } from "./mailbox";
import type { NoticeRelay, NoticeRelays, SessionBound } from "./notice-relay";

/** What the Link handler needs. */
export interface LinkDeps {
  readonly registry: LinkRegistry;
  readonly clock: Clock;
  readonly heartbeatMs: number;
  readonly helloTimeoutMs: number;
  /** Relays cube's notices on links whose hello accepts them; absent without a cube address (no notices). */
  readonly notices?: NoticeRelays | undefined;
}

type Item =
  | { readonly k: "msg"; readonly m: LinkRequest }
  | { readonly k: "end" }
  | { readonly k: "tick" }
  | { readonly k: "hello-timeout" }
  | { readonly k: "abort" }
  | { readonly k: "notice"; readonly notice: Notice }
  | { readonly k: "bound"; readonly bound: SessionBound }
  | { readonly k: "close"; readonly reason: LinkCloseReason };

/** The answer to a `session` request on a replica that relays no notices (no cube address). */
const noRelay = (requestId: number): SessionBound => ({
  requestId,
  code: grpcStatus.FAILED_PRECONDITION,
  message: "this presence server relays no notices (no cube address)",
  droneId: "",
  cubeId: "",
  expiresAtMs: 0n,
});

/**
 * The body of one machine's link (LinkService.Link after the caller was checked): hello →
 * linked, heartbeats both ways, closed(reason) when the server ends it. While the stream is open
 * and current, its machine is linked.
 */
export async function* linkStream(
  deps: LinkDeps,
  principal: TenantPrincipal,
  requests: AsyncIterable<LinkRequest>,
  ctx: CallContext,
): AsyncGenerator<LinkResponse> {
  const intervalSeconds = heartbeatSeconds(deps.heartbeatMs);
  // Revocation is checked when the link is recorded, under the machine's row lock.
  const mailbox = new Mailbox<Item>();
  void (async () => {
    try {
      for await (const message of requests) mailbox.push({ k: "msg", m: message });
    } catch {
      // A broken client stream ends the link like a close.
    }
    mailbox.push({ k: "end" });
  })();
  const onAbort = () => mailbox.push({ k: "abort" });
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  const helloTimer = setTimeout(() => mailbox.push({ k: "hello-timeout" }), deps.helloTimeoutMs);
  let ticker: NodeJS.Timeout | undefined;
  let handle: LinkHandle | undefined;
  let relay: NoticeRelay | undefined;
  try {
    const first = await mailbox.take();
    clearTimeout(helloTimer);
    if (first.k === "hello-timeout") {
      throw new InvalidArgumentError("hello", `was not received within ${deps.helloTimeoutMs} ms`);
    }
    if (first.k !== "msg") return;
    validateHello(first.m);
    const candidate: LinkHandle = {
      machineId: principal.subjectId,
      tenantId: principal.tenantId,
      linkId: randomUUID(),
      close: (reason) => mailbox.push({ k: "close", reason }),
    };
    await deps.registry.open(candidate);
    handle = candidate;
    yield linkedResponse(handle.machineId, handle.linkId, intervalSeconds);
    // Notices only for a daemon that said it takes them, and only with a cube to take them from.
    if (first.m.event.case === "hello" && first.m.event.value.acceptsNotices && deps.notices) {
      relay = deps.notices.open({ tenantId: principal.tenantId, machineId: principal.subjectId }, (notice) =>
        mailbox.push({ k: "notice", notice }),
      );
    }
    let lastHeard = performance.now();
    /** Per session token, its last session request on this link (the next waits for it). */
    const binding = new Map<string, Promise<void>>();
    ticker = setInterval(() => mailbox.push({ k: "tick" }), deps.heartbeatMs);
    for (;;) {
      const item = await mailbox.take();
      switch (item.k) {
        case "msg":
          lastHeard = performance.now();
          validateLater(item.m);
          if (item.m.event.case === "confirm") void relay?.confirm(item.m.event.value.noticeId);
          if (item.m.event.case === "session") {
            const bind = item.m.event.value;
            const machine = { tenantId: principal.tenantId, machineId: principal.subjectId };
            const notices = deps.notices;
            if (!notices) mailbox.push({ k: "bound", bound: noRelay(bind.requestId) });
            else {
              // One token's requests apply in the order the daemon sent them (a hook's tie, then the
              // session-end's untie), never racing each other to cube; other tokens' go on meanwhile.
              const token = bind.sessionToken;
              const applied = (binding.get(token) ?? Promise.resolve())
                .then(() => notices.bindSession(machine, bind.requestId, token, bind.unbind))
                .then((bound) => mailbox.push({ k: "bound", bound }));
              binding.set(token, applied);
              void applied.finally(() => {
                if (binding.get(token) === applied) binding.delete(token);
              });
            }
          }
          break;
        case "bound":
          yield sessionBoundResponse(item.bound);
          break;
        case "notice":
          yield noticeResponse(item.notice);
          break;
        case "tick":
          if (heartbeatMissed(lastHeard, performance.now(), deps.heartbeatMs)) {
            yield closed(LinkCloseReason.HEARTBEAT_MISSED);
            return;
          }
          yield linkHeartbeat(deps.clock.now());
          break;
        case "close":
          yield closed(item.reason);
          return;
        case "abort":
          // The replica drained and is stopping (the kit's typed ShutdownReason): say "going away"
          // and keep the ownership row, so the daemon reconnects to another replica within the
          // lease without a presence flap. A killed replica (tests) says nothing.
          if (isShutdown(ctx.signal) && !deps.registry.dead) {
            deps.registry.stopping = true;
            yield goingAwayResponse();
          }
          return;
        default:
          return;
      }
    }
  } finally {
    clearTimeout(helloTimer);
    clearInterval(ticker);
    ctx.signal.removeEventListener("abort", onAbort);
    await relay?.stop();
    if (handle) await deps.registry.closed(handle);
  }
}
