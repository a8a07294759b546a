/** Notification kinds that coalesce: repeated ACKs and REPLYs between the same two drones. */
export const COALESCED_KINDS: ReadonlySet<string> = new Set(["ack", "reply"]);

/** Whether a notification of `kind` from an actor drone is subject to the coalescing window. */
export function coalesces(kind: string, actorDroneId: string | undefined, windowSeconds: number): boolean {
  return windowSeconds > 0 && actorDroneId !== undefined && COALESCED_KINDS.has(kind);
}
