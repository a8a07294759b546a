import type { LinkRequest } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { InvalidArgumentError, requireText } from "@unimatrix/service-kit";

/** Text of a hello field: optional, one line, no control characters, at most `chars` characters. */
function helloText(field: string, value: string, chars: number): void {
  requireText(field, value, { optional: true, multiline: false, maxBytes: chars * 4 });
  if ([...value].length > chars) throw new InvalidArgumentError(field, `must be at most ${chars} characters`);
}

/** The first message of a link: a `hello` whose fields fit; INVALID_ARGUMENT naming the field otherwise. */
export function validateHello(message: LinkRequest): void {
  if (message.event.case !== "hello") {
    throw new InvalidArgumentError("hello", "must be the first message of a link");
  }
  helloText("hello.agent_version", message.event.value.agentVersion, 100);
  helloText("hello.hostname", message.event.value.hostname, 255);
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
