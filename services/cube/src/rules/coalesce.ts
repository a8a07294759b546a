/** Notification kinds that coalesce: repeated ACKs and REPLYs between the same two drones. */
export const COALESCED_KINDS: ReadonlySet<string> = new Set(["ack", "reply"]);

/** Whether a notification of `kind` from an actor drone is subject to the coalescing window. */
export function coalesces(kind: string, actorDroneId: string | undefined, windowSeconds: number): boolean {
  return windowSeconds > 0 && actorDroneId !== undefined && COALESCED_KINDS.has(kind);
}

/**
 * The coalescing decision: a notification is written when no earlier one of the same kind from
 * the same actor to the same recipient was written, or the last one is at least the window old.
 * The database makes the same decision in one conditional upsert of the mark (fleet-safe).
 */
export function admits(lastAt: Date | null, now: Date, windowSeconds: number): boolean {
  return lastAt === null || lastAt.getTime() <= now.getTime() - windowSeconds * 1000;
}
