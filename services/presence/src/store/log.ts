import type { RawQuery } from "@unimatrix/service-kit/store";
import type { PrismaClient } from "../../generated/prisma/client";
import { type EventRow, eventOf, type PresenceEvent } from "./rows";

/** The state of a tenant's log: head (latest cursor), pruned floor and revocation counter. */
export interface LogState {
  readonly head: bigint;
  readonly floor: bigint;
  readonly revocations: bigint;
}

/** A page of a tenant's log after a cursor, read in one statement with the log state. */
export interface LogPage extends LogState {
  readonly events: PresenceEvent[];
}

/** One machine in a snapshot. */
export interface SnapshotItem {
  readonly machineId: string;
  readonly name: string;
  readonly linked: boolean;
  readonly changedAt: Date | null;
}

/** A consistent picture of a tenant: every non-revoked machine and the cursor it reflects. */
export interface Snapshot extends LogState {
  readonly items: SnapshotItem[];
}

const EMPTY: LogState = { head: 0n, floor: 0n, revocations: 0n };

type PageRow = Partial<EventRow> & { head: bigint | null; floor: bigint | null; revocations: bigint | null };

/** Reads of the retained event log. */
export class LogStore {
  constructor(
    private readonly prisma: PrismaClient,
    /** The hot reads (a feed drain per doorbell, the state at every resume) straight on the pool. */
    private readonly fast: RawQuery = prisma,
  ) {}

  /** Events of a tenant with seq > `after`, in sequence order, at most `limit`. */
  async page(tenantId: string, after: bigint, limit: number): Promise<LogPage> {
    const rows = await this.fast.$queryRaw<PageRow[]>`
      SELECT t.head, t.floor, t.revocations, e.seq, e.tenant_id::text AS tenant_id,
             e.machine_id::text AS machine_id, e.name, e.linked, e.at
      FROM (SELECT 1) one
      LEFT JOIN tenant_logs t ON t.tenant_id = ${tenantId}::uuid
      LEFT JOIN LATERAL (
        SELECT * FROM presence_events pe
        WHERE pe.tenant_id = ${tenantId}::uuid AND pe.seq > ${after}
        ORDER BY pe.seq LIMIT ${limit}
      ) e ON true
      ORDER BY e.seq`;
    const first = rows[0];
    const state = first?.head == null ? EMPTY : stateOf(first);
    const events = rows.filter((r) => r.seq != null).map((r) => eventOf(r as EventRow));
    return { ...state, events };
  }

  /** The tenant's log state alone. */
  async state(tenantId: string): Promise<LogState> {
    const rows = await this.fast.$queryRaw<PageRow[]>`
      SELECT head, floor, revocations FROM tenant_logs WHERE tenant_id = ${tenantId}::uuid`;
    const row = rows[0];
    return row ? stateOf(row) : EMPTY;
  }

  /**
   * Every non-revoked machine with presence, by name, and the head it reflects — one statement,
   * so one database snapshot: the items are exactly the state after event `head`.
   */
  async snapshot(tenantId: string): Promise<Snapshot> {
    const rows = await this.prisma.$queryRaw<
      {
        head: bigint | null;
        floor: bigint | null;
        revocations: bigint | null;
        id: string | null;
        name: string | null;
        linked: boolean | null;
        changed_at: Date | null;
      }[]
    >`
      SELECT t.head, t.floor, t.revocations, m.id, m.name, m.linked, m.changed_at
      FROM (SELECT 1) one
      LEFT JOIN tenant_logs t ON t.tenant_id = ${tenantId}::uuid
      LEFT JOIN LATERAL (
        SELECT mm.id::text AS id, mm.name, p.linked, p.changed_at
        FROM machines mm JOIN presence p ON p.machine_id = mm.id
        WHERE mm.tenant_id = ${tenantId}::uuid AND mm.revoked_at IS NULL
      ) m ON true
      ORDER BY m.name, m.id`;
    const first = rows[0];
    const state = first?.head == null ? EMPTY : stateOf(first as PageRow);
    const items: SnapshotItem[] = [];
    for (const row of rows) {
      if (row.id === null) continue;
      items.push({ machineId: row.id, name: row.name ?? "", linked: row.linked === true, changedAt: row.changed_at });
    }
    return { ...state, items };
  }
}

function stateOf(row: { head: bigint | null; floor: bigint | null; revocations: bigint | null }): LogState {
  return { head: BigInt(row.head ?? 0), floor: BigInt(row.floor ?? 0), revocations: BigInt(row.revocations ?? 0) };
}
