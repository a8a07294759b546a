import { timestampMs } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { type Notice, NoticeService } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import type { LinkSessionBound } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { attachPrincipal } from "@unimatrix/service-kit/auth";
import { sleep } from "@unimatrix/service-kit/clock";
import { createClient, isServiceError, type TypedClient } from "@unimatrix/service-kit/grpc";
import type { Logger } from "pino";

/** Waits between two attempts to open a machine's notice watch after a failure (doubling up to the max). */
const RETRY_MIN_MS = 200;
const RETRY_MAX_MS = 5_000;
/** Attempts of one ConfirmNotice that meets UNAVAILABLE (a cube replica going away). */
const CONFIRM_ATTEMPTS = 3;

/** The Link's `session_bound` answer (its fields). */
export type SessionBound = Omit<LinkSessionBound, "$typeName">;

/** Counts of what this replica's relays did (tests and metrics). */
export interface RelayStats {
  /** Notices handed to links. */
  forwarded: number;
  /** Confirmations cube answered `newly_confirmed`. */
  newlyConfirmed: number;
  /** Confirmations of notices confirmed before (a daemon confirming every copy). */
  repeatConfirmed: number;
  /** Watches opened on cube (first opens and re-opens). */
  watchesOpened: number;
}

/** What relays share on a replica: the cube NoticeService client, the internal key, counters. */
export class NoticeRelays {
  readonly stats: RelayStats = { forwarded: 0, newlyConfirmed: 0, repeatConfirmed: 0, watchesOpened: 0 };
  readonly #client: TypedClient<typeof NoticeService>;
  readonly #open = new Set<NoticeRelay>();

  constructor(
    cubeAddress: string,
    readonly internalKey: string,
    readonly logger: Logger,
  ) {
    this.#client = createClient(NoticeService, cubeAddress);
  }

  get client(): TypedClient<typeof NoticeService> {
    return this.#client;
  }

  /** Starts relaying a machine's notices to `deliver` until `stop()` (the link ended or was replaced). */
  open(machine: { tenantId: string; machineId: string }, deliver: (notice: Notice) => void): NoticeRelay {
    const relay = new NoticeRelay(this, machine, deliver);
    this.#open.add(relay);
    void relay.done.then(() => this.#open.delete(relay));
    return relay;
  }

  /**
   * Asks cube to tie (or untie) the drone session of `sessionToken` to the machine
   * (NoticeService.BindSession as the machine), and answers with the Link's `session_bound`:
   * code 0 with the session's drone, cube and expiry, or the refusal's gRPC code and message
   * (anything but a gRPC status is UNAVAILABLE: the daemon may ask again).
   */
  async bindSession(
    machine: { tenantId: string; machineId: string },
    requestId: number,
    sessionToken: string,
    unbind: boolean,
  ): Promise<SessionBound> {
    try {
      const bound = await this.#client.bindSession(
        { sessionToken, unbind },
        { metadata: machineMetadata(this, machine), deadline: 10_000 },
      );
      return {
        requestId,
        code: grpc.status.OK,
        message: "",
        droneId: bound.droneId,
        cubeId: bound.cubeId,
        expiresAtMs: bound.expiresAt ? BigInt(timestampMs(bound.expiresAt)) : 0n,
      };
    } catch (error) {
      const code = isServiceError(error) ? error.code : grpc.status.UNAVAILABLE;
      if (!isServiceError(error)) this.logger.warn({ err: error, machineId: machine.machineId }, "BindSession failed");
      const message = isServiceError(error) ? error.details : "cube could not be asked";
      return { requestId, code, message, droneId: "", cubeId: "", expiresAtMs: 0n };
    }
  }

  /** Relays running now (one per link that accepts notices). */
  get size(): number {
    return this.#open.size;
  }

  /** Stops every relay, then closes the client. */
  async close(): Promise<void> {
    await Promise.all([...this.#open].map((relay) => relay.stop()));
    this.#client.close();
  }
}

/** Call metadata carrying the machine's principal, signed with the internal key (fresh per call). */
function machineMetadata(relays: NoticeRelays, machine: { tenantId: string; machineId: string }): grpc.Metadata {
  return attachPrincipal(
    new grpc.Metadata(),
    { kind: "machine", tenantId: machine.tenantId, subjectId: machine.machineId },
    relays.internalKey,
  );
}

/**
 * One link's relay: holds a WatchNotices stream on cube as the machine, hands each notice to the
 * link, and re-opens the watch when cube says `going_away`, when the stream fails or ends (with a
 * capped backoff after failures). Cube resends every unconfirmed notice on a new watch with the
 * same id; the daemon dedupes by id.
 */
export class NoticeRelay {
  readonly #abort = new AbortController();
  readonly #done: Promise<void>;

  constructor(
    private readonly relays: NoticeRelays,
    private readonly machine: { tenantId: string; machineId: string },
    private readonly deliver: (notice: Notice) => void,
  ) {
    this.#done = this.#run();
  }

  /** Resolves when the relay stopped. */
  get done(): Promise<void> {
    return this.#done.catch(() => {});
  }

  async #run(): Promise<void> {
    let backoff = RETRY_MIN_MS;
    const signal = this.#abort.signal;
    while (!signal.aborted) {
      let healthy = false;
      try {
        const stream = this.relays.client.watchNotices(
          {},
          { metadata: machineMetadata(this.relays, this.machine), signal },
        );
        this.relays.stats.watchesOpened += 1;
        for await (const event of stream) {
          healthy = true;
          if (event.event.case === "notice") {
            this.relays.stats.forwarded += 1;
            this.deliver(event.event.value);
          } else if (event.event.case === "goingAway") {
            break;
          }
        }
      } catch (error) {
        if (signal.aborted) return;
        this.relays.logger.warn(
          { err: error, machineId: this.machine.machineId },
          "notice watch on cube failed; re-opening",
        );
      }
      if (signal.aborted) return;
      // A watch that delivered anything (or said going_away) re-opens at once; a failing one waits.
      if (healthy) backoff = RETRY_MIN_MS;
      else {
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, RETRY_MAX_MS);
      }
    }
  }

  /**
   * Forwards the daemon's confirmation to cube (ConfirmNotice as the machine). Failures are logged:
   * the notice stays unconfirmed and is sent again on the next watch, with the same id.
   */
  async confirm(noticeId: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const { newlyConfirmed } = await this.relays.client.confirmNotice(
          { noticeId },
          { metadata: machineMetadata(this.relays, this.machine), deadline: 10_000 },
        );
        if (newlyConfirmed) this.relays.stats.newlyConfirmed += 1;
        else this.relays.stats.repeatConfirmed += 1;
        return;
      } catch (error) {
        const retry = isServiceError(error) && error.code === grpc.status.UNAVAILABLE && attempt < CONFIRM_ATTEMPTS;
        if (!retry) {
          // A notice that is not this machine's (or gone) is the daemon's mistake, answered as such: not a warning.
          const refused =
            isServiceError(error) &&
            (error.code === grpc.status.NOT_FOUND ||
              error.code === grpc.status.PERMISSION_DENIED ||
              error.code === grpc.status.INVALID_ARGUMENT);
          const fields = { err: error, noticeId, machineId: this.machine.machineId };
          if (refused) this.relays.logger.info(fields, "ConfirmNotice refused");
          else this.relays.logger.warn(fields, "ConfirmNotice failed");
          return;
        }
      }
    }
  }

  /** Ends the watch (the link ended or was replaced). */
  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#done.catch(() => {});
  }
}
