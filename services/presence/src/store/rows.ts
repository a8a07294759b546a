/** A machine with its presence, as the store returns it. */
export interface MachineRecord {
  readonly id: string;
  readonly tenantId: string;
  readonly name: string;
  readonly linked: boolean;
  readonly changedAt: Date | null;
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
}

/** A position in the by-name listing (keyset: name, then id). */
export interface ListPosition {
  readonly name: string;
  readonly id: string;
}

/** One committed presence transition. */
export interface PresenceEvent {
  readonly seq: bigint;
  readonly tenantId: string;
  readonly machineId: string;
  readonly name: string;
  readonly linked: boolean;
  readonly at: Date;
}

/**
 * Where a committed event sits in its tenant's log: the tenant's head before it and the tenant's
 * revocation counter, both read under the tenant's log row lock in the event's transaction.
 */
export interface LogPosition {
  readonly prev: bigint;
  readonly revocations: bigint;
}

/** Raw row of `presence_events`. */
export interface EventRow {
  seq: bigint | string;
  tenant_id: string;
  machine_id: string;
  name: string;
  linked: boolean;
  at: Date;
}

/** Maps a raw event row. */
export function eventOf(row: EventRow): PresenceEvent {
  return {
    seq: BigInt(row.seq),
    tenantId: row.tenant_id,
    machineId: row.machine_id,
    name: row.name,
    linked: row.linked,
    at: row.at,
  };
}
