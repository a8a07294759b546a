import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import {
  LinkCloseReason,
  type LinkNotice,
  type LinkRequestSchema,
  type LinkResponse,
  LinkService,
  type LinkSessionBound,
} from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { type BackoffOptions, backoffDelay } from "./backoff";

/** Why the link loop ended for good (it never ends on its own for a transient failure). */
export type LinkEnd = "stopped" | "replaced" | "revoked" | "unauthenticated";

/** Where and how the daemon links, and what it does with what arrives. */
export interface LinkOptions {
  /** Any gRPC target of presence (`host:port`, `dns:///…`, `unix:/…`). */
  readonly target: string;
  /** The machine's `umx_machine_…` token. */
  readonly token: string;
  /** Channel credentials (TLS when configured); plaintext by default. */
  readonly credentials?: grpc.ChannelCredentials;
  readonly hostname: string;
  readonly agentVersion: string;
  readonly backoff?: BackoffOptions;
  /** Waits `ms` (the seam tests replace so reconnects need no real sleep). */
  readonly sleep?: (ms: number) => Promise<void>;
  /** How long to wait for `linked` after opening a stream (ms). */
  readonly linkTimeoutMs?: number;
  readonly onNotice: (notice: LinkNotice) => void;
  readonly onEvent: (event: string, fields?: Record<string, unknown>) => void;
}

type Outcome =
  | { kind: "going_away" }
  | { kind: "broken"; linked: boolean; detail: string }
  | { kind: "end"; end: LinkEnd };

/**
 * The machine's side of presence's Link: hello with `accepts_notices`, heartbeats at the
 * interval `linked` names, a link silent for three intervals is dropped and reopened, `going_away`
 * reopens at once, any other break reopens after an exponential, jittered backoff (reset once a
 * link held). `closed` REPLACED or REVOKED and UNAUTHENTICATED / PERMISSION_DENIED end the loop:
 * retrying cannot help. Each attempt dials a fresh channel, so this backoff is the only one.
 */
export class PresenceLink {
  readonly #options: LinkOptions;
  #call: grpc.ClientDuplexStream<MessageInitShape<typeof LinkRequestSchema>, LinkResponse> | undefined;
  #linked = false;
  #stopped = false;
  #wake: (() => void) | undefined;
  #nextRequest = 1;
  /** `session` requests waiting for their `session_bound`, by request id. */
  readonly #binds = new Map<number, { resolve: (bound: LinkSessionBound) => void; reject: (error: Error) => void }>();
  /** Links established so far. */
  links = 0;
  machineId = "";
  /** Resolves when the loop ends for good. */
  readonly ended: Promise<LinkEnd>;

  constructor(options: LinkOptions) {
    this.#options = options;
    this.ended = this.#loop();
  }

  get linked(): boolean {
    return this.#linked;
  }

  /** Confirms a notice on the open link; false when not linked (presence resends it on the next link). */
  confirm(noticeId: string): boolean {
    if (!this.#linked || !this.#call || this.#call.writableEnded) return false;
    this.#call.write({ event: { case: "confirm", value: { noticeId } } });
    return true;
  }

  /**
   * Asks presence to tie (or untie) the drone session of `sessionToken` to this machine and
   * resolves with its `session_bound` answer (`code` 0 or a gRPC status code). Rejects when not
   * linked, when the link breaks first, or after `timeoutMs`.
   */
  bindSession(sessionToken: string, unbind: boolean, timeoutMs = 5_000): Promise<LinkSessionBound> {
    const call = this.#call;
    if (!this.#linked || !call || call.writableEnded) return Promise.reject(new Error("not linked to presence"));
    const requestId = this.#nextRequest;
    this.#nextRequest = (this.#nextRequest % 0xffff_fffe) + 1;
    return new Promise<LinkSessionBound>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#binds.delete(requestId);
        reject(new Error(`presence did not answer the session request within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#binds.set(requestId, {
        resolve: (bound) => {
          clearTimeout(timer);
          resolve(bound);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      call.write({ event: { case: "session", value: { requestId, sessionToken, unbind } } });
    });
  }

  /** Ends the link and the loop. */
  stop(): Promise<LinkEnd> {
    this.#stopped = true;
    this.#call?.cancel();
    this.#wake?.();
    return this.ended;
  }

  async #loop(): Promise<LinkEnd> {
    let attempt = 0;
    while (!this.#stopped) {
      const outcome = await this.#attempt();
      if (this.#stopped) break;
      if (outcome.kind === "end") {
        this.#options.onEvent("link_ended", { reason: outcome.end });
        return outcome.end;
      }
      if (outcome.kind === "going_away") {
        this.#options.onEvent("going_away");
        attempt = 0;
        continue;
      }
      if (outcome.linked) attempt = 0;
      const delay = backoffDelay(attempt, this.#options.backoff);
      attempt += 1;
      this.#options.onEvent("link_broken", { detail: outcome.detail, retryInMs: delay });
      await this.#sleep(delay);
    }
    return "stopped";
  }

  #sleep(ms: number): Promise<void> {
    const sleep = this.#options.sleep ?? ((n: number) => new Promise<void>((r) => setTimeout(r, n).unref?.()));
    return new Promise<void>((resolve) => {
      this.#wake = resolve;
      void sleep(ms).then(resolve);
    });
  }

  #attempt(): Promise<Outcome> {
    const o = this.#options;
    const client = createClient(LinkService, o.target, o.credentials ?? grpc.credentials.createInsecure());
    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${o.token}`);
    const call = client.link({ metadata }).call;
    this.#call = call;
    let heartbeat: NodeJS.Timeout | undefined;
    let watchdog: NodeJS.Timeout | undefined;
    let intervalMs = 0;
    let lastHeard = Date.now();
    return new Promise<Outcome>((resolve) => {
      let settled = false;
      const finish = (outcome: Outcome) => {
        if (settled) return;
        settled = true;
        this.#linked = false;
        for (const waiting of this.#binds.values()) waiting.reject(new Error("the link to presence broke"));
        this.#binds.clear();
        clearInterval(heartbeat);
        clearInterval(watchdog);
        clearTimeout(linkTimer);
        call.cancel();
        client.close();
        resolve(outcome);
      };
      const linkTimer = setTimeout(
        () => finish({ kind: "broken", linked: false, detail: "no `linked` in time" }),
        o.linkTimeoutMs ?? 15_000,
      );
      call.on("data", (response: LinkResponse) => {
        lastHeard = Date.now();
        const event = response.event;
        switch (event.case) {
          case "linked": {
            clearTimeout(linkTimer);
            this.#linked = true;
            this.links += 1;
            this.machineId = event.value.machineId;
            intervalMs = Math.max(50, event.value.heartbeatIntervalSeconds * 1000 || 15_000);
            heartbeat = setInterval(() => {
              if (!call.writableEnded) call.write({ event: { case: "heartbeat", value: { at: timestampNow() } } });
            }, intervalMs);
            watchdog = setInterval(() => {
              if (Date.now() - lastHeard > 3 * intervalMs)
                finish({ kind: "broken", linked: true, detail: "presence silent for 3 heartbeat intervals" });
            }, intervalMs);
            o.onEvent("linked", { machineId: event.value.machineId, linkId: event.value.linkId, intervalMs });
            break;
          }
          case "notice":
            o.onNotice(event.value);
            break;
          case "sessionBound": {
            const waiting = this.#binds.get(event.value.requestId);
            this.#binds.delete(event.value.requestId);
            waiting?.resolve(event.value);
            break;
          }
          case "goingAway":
            finish({ kind: "going_away" });
            break;
          case "closed": {
            const reason = event.value.reason;
            if (reason === LinkCloseReason.REPLACED) finish({ kind: "end", end: "replaced" });
            else if (reason === LinkCloseReason.REVOKED) finish({ kind: "end", end: "revoked" });
            else if (reason === LinkCloseReason.SHUTDOWN) finish({ kind: "going_away" });
            else finish({ kind: "broken", linked: this.#linked, detail: `closed ${LinkCloseReason[reason]}` });
            break;
          }
          default:
            break;
        }
      });
      call.on("error", (error: grpc.ServiceError) => {
        if (error.code === grpc.status.UNAUTHENTICATED || error.code === grpc.status.PERMISSION_DENIED)
          finish({ kind: "end", end: "unauthenticated" });
        else finish({ kind: "broken", linked: this.#linked, detail: `${grpc.status[error.code]}: ${error.details}` });
      });
      call.on("end", () => finish({ kind: "broken", linked: this.#linked, detail: "stream ended" }));
      call.write({
        event: {
          case: "hello",
          value: { agentVersion: o.agentVersion, hostname: o.hostname, acceptsNotices: true },
        },
      });
    });
  }
}
