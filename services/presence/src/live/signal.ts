import { type Bus, publishAfterCommit } from "@unimatrix/service-kit/bus";
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

/** Rings a tenant's doorbell after commit (the kit's publishAfterCommit: awaited, never throws; readers heal). */
export async function publishSignal(bus: Bus, logger: Logger, tenantId: string, signal: PresenceSignal): Promise<void> {
  await publishAfterCommit(bus, presenceChannel(tenantId), JSON.stringify(signal), logger);
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
