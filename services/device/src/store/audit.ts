import { randomUUID } from "node:crypto";
import { StoreAnomalyError } from "@unimatrix/service-kit/store";
import { Prisma } from "../../generated/prisma/client";
import type { AuditType } from "../rules/catalog";
import type { AuditRow, Db, Tx } from "./rows";

/** One audit row to write. */
export interface AuditInput {
  readonly type: AuditType;
  readonly tenantId: string;
  readonly ownerSubjectId: string;
  readonly actorId: string;
  readonly at: Date;
  readonly deviceId?: string | null;
  readonly rootSessionId?: string;
  readonly enrollTokenId?: string | null;
  readonly detail?: Record<string, unknown>;
}

/**
 * Appends an audit row inside the caller's transaction and returns its `seq` (the cursor that
 * bus notes carry). If it fails, the error propagates and the whole change rolls back.
 */
export async function writeAudit(tx: Tx, event: AuditInput): Promise<bigint> {
  const rows = await tx.$queryRaw<{ seq: bigint }[]>`
    INSERT INTO audit_events
      (id, tenant_id, owner_subject_id, event_type, device_id, actor_id, root_session_id, enroll_token_id, detail, at)
    VALUES (${randomUUID()}::uuid, ${event.tenantId}::uuid, ${event.ownerSubjectId}::uuid, ${event.type},
      ${event.deviceId ?? null}::uuid, ${event.actorId}, ${event.rootSessionId ?? ""},
      ${event.enrollTokenId ?? null}::uuid, ${JSON.stringify(event.detail ?? {})}::jsonb, ${event.at})
    RETURNING seq`;
  const seq = rows[0]?.seq;
  if (seq === undefined) throw new StoreAnomalyError("audit insert returned no row");
  return seq;
}

/** Filters of ListAuditEvents, already validated. */
export interface AuditFilter {
  /** The caller's tenant. */
  readonly tenantId: string;
  /** Only rows owned by this subject (CLIENT callers). */
  readonly ownerSubjectId: string | null;
  readonly deviceId: string | null;
  readonly types: readonly AuditType[];
  readonly start: Date | null;
  readonly end: Date | null;
  /** Only rows with seq below this (the page cursor). */
  readonly beforeSeq: bigint | null;
  readonly limit: number;
}

/** Audit rows matching the filter, newest first (by seq). */
export async function listAudit(db: Db, filter: AuditFilter): Promise<AuditRow[]> {
  const where: Prisma.Sql[] = [Prisma.sql`tenant_id = ${filter.tenantId}::uuid`];
  if (filter.ownerSubjectId) where.push(Prisma.sql`owner_subject_id = ${filter.ownerSubjectId}::uuid`);
  if (filter.deviceId) where.push(Prisma.sql`device_id = ${filter.deviceId}::uuid`);
  if (filter.types.length > 0) where.push(Prisma.sql`event_type IN (${Prisma.join([...filter.types])})`);
  if (filter.start) where.push(Prisma.sql`at >= ${filter.start}`);
  if (filter.end) where.push(Prisma.sql`at < ${filter.end}`);
  if (filter.beforeSeq !== null) where.push(Prisma.sql`seq < ${filter.beforeSeq}`);
  return db.$queryRaw<AuditRow[]>`
    SELECT id::text, seq, tenant_id::text, owner_subject_id::text, event_type, device_id::text, actor_id,
      root_session_id, enroll_token_id::text, detail, at
    FROM audit_events WHERE ${Prisma.join(where, " AND ")}
    ORDER BY seq DESC LIMIT ${filter.limit}`;
}
