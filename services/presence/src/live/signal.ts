import type { Bus } from "@unimatrix/service-kit";
import type { Logger } from "pino";

/**
 * A doorbell on `presence:<tenant>`: "the tenant's log or links changed, go look". Receivers
 * verify against the database before acting; a lost signal is healed by heartbeats and reconcile.
 */
export interface PresenceSignal {
  /** A transition was committed at this cursor. */
  readonly seq?: string;
  /** Machine `m` is now served by link `l` (other links of `m` are replaced). */
  readonly link?: { readonly m: string; readonly l: string };
  /** Machine id that was revoked (its link closes, watchers re-check credentials). */
  readonly revoked?: string;
  /** The tenant's log changed without a transition (e.g. pruning): watchers re-read state. */
  readonly poke?: true;
}

/** The bus channel of a tenant's presence. */
export function presenceChannel(tenantId: string): string {
  return `presence:${tenantId}`;
}

/** Publishes a signal after commit; a failed publish is logged, never thrown (readers heal). */
export async function publishSignal(bus: Bus, logger: Logger, tenantId: string, signal: PresenceSignal): Promise<void> {
  try {
    await bus.publish(presenceChannel(tenantId), JSON.stringify(signal));
  } catch (error) {
    logger.warn({ err: error, tenantId }, "presence signal not published; readers heal from the database");
  }
}

/** Parses a signal; null for anything malformed. */
export function parseSignal(message: string): PresenceSignal | null {
  try {
    const value = JSON.parse(message) as unknown;
    return typeof value === "object" && value !== null ? (value as PresenceSignal) : null;
  } catch {
    return null;
  }
}
