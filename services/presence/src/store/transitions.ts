import { UnauthenticatedError } from "@unimatrix/service-kit/errors";
import { inTransaction, type Tx as KitTx, type RawQuery, StoreAnomalyError } from "@unimatrix/service-kit/store";
import type { PrismaClient } from "../../generated/prisma/client";
import { type EventRow, eventOf, type LogPosition, type PresenceEvent } from "./rows";

/** This service's interactive-transaction client. */
type Tx = KitTx<PrismaClient>;

/** Who holds a link: a replica, one link id, until the lease expires. */
export interface Ownership {
  readonly replicaId: string;
  readonly linkId: string;
  readonly leaseExpiresAt: Date;
}

interface LockedPresence {
  tenant_id: string;
  name: string;
  linked: boolean;
  revoked_at: Date | null;
  /** The current link owner, read under the same lock. */
  owner_replica: string | null;
  owner_link: string | null;
}

/**
 * Locks a machine's presence row: every transition of one machine goes through this lock, so
 * they are serialized. Lock order everywhere: presence row, then the tenant's log row.
 */
export async function lockPresence(tx: Tx, machineId: string): Promise<LockedPresence | null> {
  const rows = await tx.$queryRaw<LockedPresence[]>`
    SELECT p.tenant_id::text AS tenant_id, m.name, p.linked, m.revoked_at,
           o.replica_id AS owner_replica, o.link_id::text AS owner_link
    FROM presence p JOIN machines m ON m.id = p.machine_id
    LEFT JOIN link_owners o ON o.machine_id = p.machine_id
    WHERE p.machine_id = ${machineId}::uuid
    FOR UPDATE OF p`;
  return rows[0] ?? null;
}

/**
 * Sets the linked value under the held presence lock and appends the event: the tenant's log row
 * is locked while the sequence number is drawn, so a tenant's events commit in sequence order and
 * a reader that saw cursor N never later finds an event below N.
 */
export async function writeTransition(
  tx: Tx,
  machineId: string,
  locked: LockedPresence,
  linked: boolean,
  at: Date,
): Promise<PresenceEvent> {
  const rows = await tx.$queryRaw<EventRow[]>`
    WITH h AS (
      UPDATE tenant_logs SET head = nextval('presence_events_seq_seq')
      WHERE tenant_id = ${locked.tenant_id}::uuid RETURNING head
    ), p AS (
      UPDATE presence SET linked = ${linked}, changed_at = ${at} WHERE machine_id = ${machineId}::uuid
    )
    INSERT INTO presence_events (seq, tenant_id, machine_id, name, linked, at)
    SELECT h.head, ${locked.tenant_id}::uuid, ${machineId}::uuid, ${locked.name}, ${linked}, ${at} FROM h
    RETURNING seq, tenant_id::text AS tenant_id, machine_id::text AS machine_id, name, linked, at`;
  const row = rows[0];
  // The tenant's log row is created with its first machine and never deleted.
  if (!row) throw new StoreAnomalyError(`tenant log row missing for tenant ${locked.tenant_id}`);
  return eventOf(row);
}

/** What opening a link changed. */
export interface LinkOpened {
  readonly tenantId: string;
  /** The linked event, or null when the machine was already linked (a replacement). */
  readonly event: PresenceEvent | null;
  /** Where the event sits in the tenant's log (null without an event). */
  readonly position: LogPosition | null;
  /** The link this one replaced, if any. */
  readonly previous: { readonly replicaId: string; readonly linkId: string } | null;
}

/** What closing a link changed: the unlinked event, or null when the machine was not linked. */
export interface LinkClosed {
  readonly tenantId: string;
  readonly event: PresenceEvent | null;
  /** Where the event sits in the tenant's log (null without an event). */
  readonly position: LogPosition | null;
}

/** One transition of a batch (`linkBatch`): a link opened or a link closed. */
export type LinkOp =
  | { readonly kind: "open"; readonly machineId: string; readonly ownership: Ownership; readonly at: Date }
  | { readonly kind: "close"; readonly machineId: string; readonly linkId: string; readonly at: Date };

/** The outcome of one transition of a batch; `null` closed = the link was no longer current (nothing changed). */
export type LinkOutcome =
  | { readonly kind: "open"; readonly opened: LinkOpened }
  | { readonly kind: "open"; readonly error: unknown }
  | { readonly kind: "close"; readonly closed: LinkClosed | null };

interface CloseRow {
  o_status: string;
  o_tenant: string | null;
  o_seq: bigint | null;
  o_name: string | null;
  /** The tenant's head before the event and its revocation counter, read under the tenant's log row lock. */
  o_prev: bigint | null;
  o_revocations: bigint | null;
}

/** Where a function's event sits in its tenant's log; null without an event. */
function positionOf(row: CloseRow): LogPosition | null {
  if (row.o_seq === null || row.o_prev === null || row.o_revocations === null) return null;
  return { prev: BigInt(row.o_prev), revocations: BigInt(row.o_revocations) };
}

interface OpenRow extends CloseRow {
  o_prev_replica: string | null;
  o_prev_link: string | null;
}

function openedOf(row: OpenRow | undefined, machineId: string, at: Date): LinkOpened {
  if (row?.o_status !== "ok" || !row.o_tenant) throw new UnauthenticatedError("machine is revoked");
  const tenantId = row.o_tenant;
  return {
    tenantId,
    event:
      row.o_seq === null
        ? null
        : { seq: BigInt(row.o_seq), tenantId, machineId, name: row.o_name ?? "", linked: true, at },
    position: positionOf(row),
    previous: row.o_prev_replica && row.o_prev_link ? { replicaId: row.o_prev_replica, linkId: row.o_prev_link } : null,
  };
}

function closedOf(row: CloseRow | undefined, machineId: string, at: Date): LinkClosed | null {
  if (row?.o_status !== "ok" || !row.o_tenant) return null;
  const tenantId = row.o_tenant;
  return {
    tenantId,
    event:
      row.o_seq === null
        ? null
        : { seq: BigInt(row.o_seq), tenantId, machineId, name: row.o_name ?? "", linked: false, at },
    position: positionOf(row),
  };
}

/** Transitions of machines: link opened, link closed, forced unlink. One transaction each. */
export class TransitionStore {
  constructor(
    private readonly prisma: PrismaClient,
    /** The two hot transitions (one function call each) straight on the pool. */
    private readonly fast: RawQuery = prisma,
  ) {}

  /**
   * Records `ownership` as the machine's current link and links it if it was not: one round
   * trip (`presence_link_open2`, see the link_functions and link_log_position migrations).
   */
  async linkOpened(machineId: string, ownership: Ownership, at: Date): Promise<LinkOpened> {
    const rows = await this.fast.$queryRaw<OpenRow[]>`
      SELECT o_status, o_tenant::text AS o_tenant, o_seq, o_name, o_prev_replica, o_prev_link::text AS o_prev_link,
             o_prev, o_revocations
      FROM presence_link_open2(${machineId}::uuid, ${ownership.replicaId}, ${ownership.linkId}::uuid,
        ${ownership.leaseExpiresAt}::timestamptz, ${at}::timestamptz)`;
    return openedOf(rows[0], machineId, at);
  }

  /**
   * Ends link `linkId` if it is still the machine's current link: drops the ownership and
   * unlinks. A replaced link changes nothing. With `expiredBefore`, only when its lease expired
   * before that instant (a surviving replica taking over a dead one's machines). One round trip
   * (`presence_link_close2`).
   */
  async linkClosed(machineId: string, linkId: string, at: Date, expiredBefore?: Date): Promise<LinkClosed | null> {
    const rows = await this.fast.$queryRaw<CloseRow[]>`
      SELECT o_status, o_tenant::text AS o_tenant, o_seq, o_name, o_prev, o_revocations
      FROM presence_link_close2(${machineId}::uuid, ${linkId}::uuid, ${at}::timestamptz,
        ${expiredBefore ?? null}::timestamptz)`;
    return closedOf(rows[0], machineId, at);
  }

  /**
   * Several opens and closes (of distinct machines, of one tenant) in one transaction, in the
   * given order: one commit for all (`presence_link_batch2`). Each outcome is what `linkOpened` or
   * `linkClosed` would have answered for it (a revoked machine's open is its own error); a failed
   * statement fails them all, and nothing was written.
   */
  async linkBatch(ops: readonly LinkOp[]): Promise<LinkOutcome[]> {
    // One transition alone (an idle tenant's): its own function, the same statements without the arrays.
    const [only] = ops;
    if (only && ops.length === 1) return [await this.#linkOne(only)];
    const kinds = ops.map((op) => op.kind);
    const machines = ops.map((op) => op.machineId);
    const links = ops.map((op) => (op.kind === "open" ? op.ownership.linkId : op.linkId));
    const replicas = ops.map((op) => (op.kind === "open" ? op.ownership.replicaId : null));
    // Instants as ISO text: every driver (pg, PGlite) passes a text array as is.
    const leases = ops.map((op) => (op.kind === "open" ? op.ownership.leaseExpiresAt.toISOString() : null));
    const ats = ops.map((op) => op.at.toISOString());
    const rows = await this.fast.$queryRaw<(OpenRow & { o_index: number })[]>`
      SELECT o_index, o_status, o_tenant::text AS o_tenant, o_seq, o_name, o_prev_replica,
             o_prev_link::text AS o_prev_link, o_prev, o_revocations
      FROM presence_link_batch2(${kinds}::text[], ${machines}::uuid[], ${links}::uuid[], ${replicas}::text[],
        ${leases}::timestamptz[], ${ats}::timestamptz[])`;
    const byIndex = new Map(rows.map((row) => [Number(row.o_index), row]));
    return ops.map((op, i): LinkOutcome => {
      const row = byIndex.get(i + 1);
      if (op.kind === "close") return { kind: "close", closed: closedOf(row, op.machineId, op.at) };
      try {
        return { kind: "open", opened: openedOf(row, op.machineId, op.at) };
      } catch (error) {
        return { kind: "open", error };
      }
    });
  }

  async #linkOne(op: LinkOp): Promise<LinkOutcome> {
    if (op.kind === "close") return { kind: "close", closed: await this.linkClosed(op.machineId, op.linkId, op.at) };
    try {
      return { kind: "open", opened: await this.linkOpened(op.machineId, op.ownership, op.at) };
    } catch (error) {
      // As in a batch: a revoked machine's open is its own outcome; a failed statement fails the call.
      if (error instanceof UnauthenticatedError) return { kind: "open", error };
      throw error;
    }
  }

  /**
   * Makes a machine's presence agree with its ownership row (reconcile): linked exactly when a
   * link owner is recorded and the machine is not revoked.
   */
  async repair(machineId: string, at: Date): Promise<{ tenantId: string; event: PresenceEvent | null } | null> {
    return inTransaction(this.prisma, async (tx) => {
      const locked = await lockPresence(tx, machineId);
      if (!locked) return null;
      if (locked.revoked_at) await tx.$executeRaw`DELETE FROM link_owners WHERE machine_id = ${machineId}::uuid`;
      const owners = await tx.$queryRaw<{ n: bigint }[]>`
        SELECT count(*) AS n FROM link_owners WHERE machine_id = ${machineId}::uuid`;
      const shouldLink = Number(owners[0]?.n ?? 0) > 0;
      if (shouldLink === locked.linked) return { tenantId: locked.tenant_id, event: null };
      return { tenantId: locked.tenant_id, event: await writeTransition(tx, machineId, locked, shouldLink, at) };
    });
  }

  /** Renews the lease of every link this replica holds; returns how many rows it renewed. */
  async renewLeases(replicaId: string, leaseExpiresAt: Date): Promise<number> {
    return this.prisma
      .$executeRaw`UPDATE link_owners SET lease_expires_at = ${leaseExpiresAt} WHERE replica_id = ${replicaId}`;
  }

  /** Links of other replicas whose lease expired before `now`. */
  async expiredLinks(replicaId: string, now: Date, limit = 1000): Promise<{ machineId: string; linkId: string }[]> {
    const rows = await this.prisma.$queryRaw<{ machine_id: string; link_id: string }[]>`
      SELECT machine_id::text AS machine_id, link_id::text AS link_id FROM link_owners
      WHERE lease_expires_at < ${now} AND replica_id <> ${replicaId}
      ORDER BY lease_expires_at LIMIT ${limit}`;
    return rows.map((r) => ({ machineId: r.machine_id, linkId: r.link_id }));
  }

  /** This replica's ownership rows: machine id → link id. */
  async ownedBy(replicaId: string): Promise<Map<string, string>> {
    const rows = await this.prisma.$queryRaw<{ machine_id: string; link_id: string }[]>`
      SELECT machine_id::text AS machine_id, link_id::text AS link_id FROM link_owners WHERE replica_id = ${replicaId}`;
    return new Map(rows.map((r) => [r.machine_id, r.link_id]));
  }

  /** The current link id of each of `machineIds` that has one. */
  async currentLinks(machineIds: readonly string[]): Promise<Map<string, string>> {
    if (machineIds.length === 0) return new Map();
    const rows = await this.prisma.$queryRaw<{ machine_id: string; link_id: string }[]>`
      SELECT machine_id::text AS machine_id, link_id::text AS link_id FROM link_owners
      WHERE machine_id = ANY(${[...machineIds]}::uuid[])`;
    return new Map(rows.map((r) => [r.machine_id, r.link_id]));
  }

  /** Machines whose presence disagrees with their ownership row, either way. */
  async disagreeing(limit = 1000): Promise<string[]> {
    const rows = await this.prisma.$queryRaw<{ machine_id: string }[]>`
      SELECT p.machine_id::text AS machine_id FROM presence p
      LEFT JOIN link_owners o ON o.machine_id = p.machine_id
      WHERE (p.linked AND o.machine_id IS NULL) OR (NOT p.linked AND o.machine_id IS NOT NULL)
      LIMIT ${limit}`;
    return rows.map((r) => r.machine_id);
  }

  /**
   * Deletes events older than `before` and raises each affected tenant's floor to the highest
   * pruned sequence, in one statement. Returns the tenants whose floor moved.
   */
  async prune(before: Date): Promise<string[]> {
    const rows = await this.prisma.$queryRaw<{ tenant_id: string }[]>`
      WITH d AS (DELETE FROM presence_events WHERE at < ${before} RETURNING tenant_id, seq),
      m AS (SELECT tenant_id, max(seq) AS mx FROM d GROUP BY tenant_id)
      UPDATE tenant_logs t SET floor = GREATEST(t.floor, m.mx) FROM m WHERE t.tenant_id = m.tenant_id
      RETURNING t.tenant_id::text AS tenant_id`;
    return rows.map((r) => r.tenant_id);
  }
}
