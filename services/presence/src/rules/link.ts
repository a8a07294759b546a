import type { LinkRequest } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";

/**
 * The first message of a link must be a `hello` (its fields' lengths and characters are the
 * contract's rules, checked in the kit for every message); INVALID_ARGUMENT naming `hello` otherwise.
 */
export function validateHello(message: LinkRequest): void {
  if (message.event.case !== "hello") {
    throw new InvalidArgumentError("hello", "must be the first message of a link");
  }
}

/** A later message of a link: `hello` again is INVALID_ARGUMENT naming `hello`. */
export function validateLater(message: LinkRequest): void {
  if (message.event.case === "hello") throw new InvalidArgumentError("hello", "must be sent only once");
}

/** Whether a link silent since `lastHeard` (ms) missed 3 heartbeats at `now` (ms). */
export function heartbeatMissed(lastHeard: number, now: number, heartbeatMs: number): boolean {
  return now - lastHeard > 3 * heartbeatMs;
}

/** The heartbeat interval announced to the daemon, whole seconds (at least 1). */
export function heartbeatSeconds(heartbeatMs: number): number {
  return Math.max(1, Math.round(heartbeatMs / 1000));
}
