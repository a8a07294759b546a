import { type Bus, publishAfterCommit } from "@unimatrix/service-kit/bus";
import type { Logger } from "pino";
import type { LogPosition, PresenceEvent } from "../store/rows";

/**
 * A committed transition carried in full by its doorbell, with where it sits in the tenant's
 * log: a feed whose cursor is exactly `prev` and `rev` fans it out without reading it back.
 */
export interface CarriedEvent {
  /** The tenant's head before the event (read under the tenant's log row lock). */
  readonly prev: string;
  /** The tenant's revocation counter at the event (read under the same lock). */
  readonly rev: string;
  /** Machine id. */
  readonly m: string;
  /** Machine name at the event. */
  readonly n: string;
  /** Linked (true) or unlinked (false). */
  readonly up: boolean;
  /** The event's instant, epoch milliseconds. */
  readonly at: number;
}

/**
 * A doorbell on `presence:<tenant>`: "the tenant's log or links changed, go look". Receivers
 * verify against the database before acting; a lost signal is healed by heartbeats and reconcile.
 * Fields are only ever added: a replica of the release before reads `seq`, `link`, `revoked`.
 */
export interface PresenceSignal {
  /** A transition was committed at this cursor. */
  readonly seq?: string;
  /** The transition at `seq` itself (absent from older replicas' doorbells, and when too large). */
  readonly ev?: CarriedEvent;
  /** Machine `m` is now served by link `l` (other links of `m` are replaced). */
  readonly link?: { readonly m: string; readonly l: string };
  /** Machine id that was revoked (its link closes, watchers re-check credentials). */
  readonly revoked?: string;
  /** The tenant's log changed without a transition (e.g. pruning): watchers re-read state. */
  readonly poke?: true;
}

/** A doorbell longer than this goes without its carried event (receivers read it instead). */
export const MAX_CARRIED_BYTES = 4096;

/** The bus channel of a tenant's presence. */
export function presenceChannel(tenantId: string): string {
  return `presence:${tenantId}`;
}

/**
 * The doorbell of a committed transition: its cursor, and the event itself when its position in
 * the log is known and the message stays under `MAX_CARRIED_BYTES`.
 */
export function transitionSignal(
  event: PresenceEvent,
  position: LogPosition | null,
  extra: Pick<PresenceSignal, "link"> = {},
): PresenceSignal {
  const plain: PresenceSignal = { seq: event.seq.toString(), ...extra };
  if (!position) return plain;
  const ev: CarriedEvent = {
    prev: position.prev.toString(),
    rev: position.revocations.toString(),
    m: event.machineId,
    n: event.name,
    up: event.linked,
    at: event.at.getTime(),
  };
  const carried = { ...plain, ev };
  return Buffer.byteLength(JSON.stringify(carried)) <= MAX_CARRIED_BYTES ? carried : plain;
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
