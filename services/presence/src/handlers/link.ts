import { randomUUID } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  LinkCloseReason,
  type LinkRequest,
  type LinkResponseSchema,
} from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import {
  type CallContext,
  type Clock,
  InvalidArgumentError,
  isShutdown,
  PermissionDeniedError,
} from "@unimatrix/service-kit";
import type { LinkHandle, LinkRegistry } from "../live/links";
import { Mailbox } from "../live/mailbox";

/** What the Link handler needs. */
export interface LinkDeps {
  readonly registry: LinkRegistry;
  readonly clock: Clock;
  readonly heartbeatMs: number;
  readonly helloTimeoutMs: number;
}

type Response = MessageInitShape<typeof LinkResponseSchema>;
type Item =
  | { readonly k: "msg"; readonly m: LinkRequest }
  | { readonly k: "end" }
  | { readonly k: "tick" }
  | { readonly k: "hello-timeout" }
  | { readonly k: "abort" }
  | { readonly k: "close"; readonly reason: LinkCloseReason };

const closed = (reason: LinkCloseReason): Response => ({ event: { case: "closed", value: { reason } } });

function validateHello(message: LinkRequest): void {
  if (message.event.case !== "hello") {
    throw new InvalidArgumentError("hello", "must be the first message of a link");
  }
  const hello = message.event.value;
  if ([...hello.agentVersion].length > 100) {
    throw new InvalidArgumentError("hello.agent_version", "must be at most 100 characters");
  }
  if ([...hello.hostname].length > 255)
    throw new InvalidArgumentError("hello.hostname", "must be at most 255 characters");
}

/**
 * LinkService.Link: hello → linked, heartbeats both ways, closed(reason) when the server ends it.
 * While the stream is open and current, its machine is linked.
 */
export function linkHandler(deps: LinkDeps) {
  const intervalSeconds = Math.max(1, Math.round(deps.heartbeatMs / 1000));
  return async function* link(requests: AsyncIterable<LinkRequest>, ctx: CallContext): AsyncIterable<Response> {
    const principal = await ctx.principal();
    if (principal.kind !== "machine") {
      throw new PermissionDeniedError("only a machine principal may open its link");
    }
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
      yield {
        event: {
          case: "linked",
          value: { machineId: handle.machineId, heartbeatIntervalSeconds: intervalSeconds, linkId: handle.linkId },
        },
      };
      let lastHeard = performance.now();
      ticker = setInterval(() => mailbox.push({ k: "tick" }), deps.heartbeatMs);
      for (;;) {
        const item = await mailbox.take();
        switch (item.k) {
          case "msg":
            lastHeard = performance.now();
            if (item.m.event.case === "hello") throw new InvalidArgumentError("hello", "must be sent only once");
            break;
          case "tick":
            if (performance.now() - lastHeard > 3 * deps.heartbeatMs) {
              yield closed(LinkCloseReason.HEARTBEAT_MISSED);
              return;
            }
            yield { event: { case: "heartbeat", value: { at: timestampFromDate(deps.clock.now()) } } };
            break;
          case "close":
            yield closed(item.reason);
            return;
          case "abort":
            if (isShutdown(ctx.signal)) {
              // The replica drained and is stopping: keep the ownership (the daemon reconnects to
              // another replica within the lease, no presence flap) and say "going away".
              deps.registry.stopping = true;
              yield { event: { case: "goingAway", value: {} } };
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
      if (handle) await deps.registry.closed(handle);
    }
  };
}
