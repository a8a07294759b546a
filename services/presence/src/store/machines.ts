import { randomUUID } from "node:crypto";
import { issueToken } from "@unimatrix/service-kit/auth";
import { AlreadyExistsError, NotFoundError } from "@unimatrix/service-kit/errors";
import { inTransaction, isUniqueViolation, type RawQuery, type Tx } from "@unimatrix/service-kit/store";
import type { PrismaClient } from "../../generated/prisma/client";
import type { ListPosition, MachineRecord, PresenceEvent } from "./rows";
import { lockPresence, writeTransition } from "./transitions";

interface MachineRow {
  id: string;
  tenant_id: string;
  name: string;
  linked: boolean | null;
  changed_at: Date | null;
  created_at: Date;
  revoked_at: Date | null;
}

function recordOf(row: MachineRow): MachineRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    linked: row.linked === true && row.revoked_at === null,
    changedAt: row.changed_at,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}

/** What revoking changed. */
export interface Revoked {
  readonly machine: MachineRecord;
  /** False when the machine was already revoked (nothing changed). */
  readonly changed: boolean;
  /** The unlinked event, when it was linked. */
  readonly event: PresenceEvent | null;
}

/** A machine's credential row: what a token is checked against. */
export interface MachineCredential {
  readonly id: string;
  readonly tenantId: string;
  readonly name: string;
  readonly verifierDigest: Uint8Array;
  readonly revoked: boolean;
}

/** Machines and their credentials. Every query is scoped by tenant. */
export class MachineStore {
  constructor(
    private readonly prisma: PrismaClient,
    /** The statements every machine call runs (credential, active) straight on the pool. */
    private readonly fast: RawQuery = prisma,
  ) {}

  /** Registers a machine (unlinked) and returns it with its plaintext token. */
  async register(tenantId: string, name: string, at: Date): Promise<{ machine: MachineRecord; token: string }> {
    const issued = issueToken("machine");
    const id = randomUUID();
    try {
      await inTransaction(this.prisma, async (tx) => {
        await tx.$executeRaw`INSERT INTO tenant_logs (tenant_id) VALUES (${tenantId}::uuid) ON CONFLICT DO NOTHING`;
        await tx.machine.create({
          data: {
            id,
            tenantId,
            name,
            lookupDigest: new Uint8Array(issued.lookupDigest),
            verifierDigest: new Uint8Array(issued.verifierDigest),
            createdAt: at,
            presence: { create: { tenantId, linked: false } },
          },
        });
      });
    } catch (error) {
      if (isUniqueViolation(error))
        throw new AlreadyExistsError(`name: a machine named ${JSON.stringify(name)} exists`);
      throw error;
    }
    const machine: MachineRecord = {
      id,
      tenantId,
      name,
      linked: false,
      changedAt: null,
      createdAt: at,
      revokedAt: null,
    };
    return { machine, token: issued.token };
  }

  /** One machine of the tenant, or NOT_FOUND (read through `client`, e.g. inside a transaction). */
  async get(
    tenantId: string,
    id: string,
    client: Pick<Tx<PrismaClient>, "$queryRaw"> = this.prisma,
  ): Promise<MachineRecord> {
    const rows = await client.$queryRaw<MachineRow[]>`
      SELECT m.id::text AS id, m.tenant_id::text AS tenant_id, m.name, p.linked, p.changed_at, m.created_at, m.revoked_at
      FROM machines m LEFT JOIN presence p ON p.machine_id = m.id
      WHERE m.id = ${id}::uuid AND m.tenant_id = ${tenantId}::uuid`;
    const row = rows[0];
    if (!row) throw new NotFoundError(`machine ${id} not found`);
    return recordOf(row);
  }

  /** A page of the tenant's machines by (name, id), after `after`. */
  async list(
    tenantId: string,
    options: { includeRevoked: boolean; limit: number; after: ListPosition | null },
  ): Promise<MachineRecord[]> {
    const afterName = options.after?.name ?? null;
    const afterId = options.after?.id ?? null;
    const rows = await this.prisma.$queryRaw<MachineRow[]>`
      SELECT m.id::text AS id, m.tenant_id::text AS tenant_id, m.name, p.linked, p.changed_at, m.created_at, m.revoked_at
      FROM machines m LEFT JOIN presence p ON p.machine_id = m.id
      WHERE m.tenant_id = ${tenantId}::uuid
        AND (${options.includeRevoked} OR m.revoked_at IS NULL)
        AND (${afterName}::text IS NULL OR (m.name, m.id) > (${afterName}::text, ${afterId}::uuid))
      ORDER BY m.name, m.id
      LIMIT ${options.limit}`;
    return rows.map(recordOf);
  }

  /**
   * Revokes a machine in one transaction: credential off, ownership dropped, unlinked (one event
   * if it was linked), the tenant's revocation counter bumped so watchers re-check credentials.
   */
  async revoke(tenantId: string, id: string, at: Date): Promise<Revoked> {
    return inTransaction(this.prisma, async (tx) => {
      const locked = await lockPresence(tx, id);
      if (!locked || locked.tenant_id !== tenantId) throw new NotFoundError(`machine ${id} not found`);
      if (locked.revoked_at) return { machine: await this.get(tenantId, id, tx), changed: false, event: null };
      await tx.$executeRaw`UPDATE machines SET revoked_at = ${at} WHERE id = ${id}::uuid`;
      await tx.$executeRaw`DELETE FROM link_owners WHERE machine_id = ${id}::uuid`;
      const event = locked.linked ? await writeTransition(tx, id, locked, false, at) : null;
      await tx.$executeRaw`UPDATE tenant_logs SET revocations = revocations + 1 WHERE tenant_id = ${tenantId}::uuid`;
      return { machine: await this.get(tenantId, id, tx), changed: true, event };
    });
  }

  /**
   * The credential row a token's lookup digest names (its verifier, whether it is revoked), or
   * null. Straight on the pool: machine calls authenticate through it (live/machine-auth.ts).
   */
  async credential(lookupDigest: Uint8Array): Promise<MachineCredential | null> {
    const rows = await this.fast.$queryRaw<
      { id: string; tenant_id: string; name: string; verifier_digest: Uint8Array; revoked_at: Date | null }[]
    >`SELECT id::text AS id, tenant_id::text AS tenant_id, name, verifier_digest, revoked_at
      FROM machines WHERE lookup_digest = ${new Uint8Array(lookupDigest)}`;
    const row = rows[0];
    if (!row) return null;
    return {
      id: row.id,
      tenantId: row.tenant_id,
      name: row.name,
      verifierDigest: row.verifier_digest,
      revoked: row.revoked_at !== null,
    };
  }

  /** True when the machine exists and is not revoked. */
  async active(id: string): Promise<boolean> {
    const rows = await this.fast.$queryRaw<{ revoked_at: Date | null }[]>`
      SELECT revoked_at FROM machines WHERE id = ${id}::uuid`;
    return rows.length === 1 && rows[0]?.revoked_at === null;
  }
}
