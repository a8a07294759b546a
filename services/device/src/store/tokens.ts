import { randomUUID } from "node:crypto";
import { issueToken } from "@unimatrix/service-kit/auth";
import { FailedPreconditionError, NotFoundError } from "@unimatrix/service-kit/errors";
import { inTransaction, StoreAnomalyError } from "@unimatrix/service-kit/store";
import { Prisma } from "../../generated/prisma/client";
import { canSee, ownedToken, type Scope } from "../rules/access";
import { expiresAt } from "../rules/enroll";
import type { TimeKey } from "../rules/paging";
import { writeAudit } from "./audit";
import { type Db, type EnrollTokenRow, TOKEN_COLUMNS } from "./rows";

const COLUMNS = Prisma.raw(TOKEN_COLUMNS);

/** A validated IssueEnrollToken. */
export interface IssueInput {
  readonly tenantId: string;
  readonly ownerSubjectId: string;
  readonly actorId: string;
  readonly ttlSeconds: number;
  readonly label: string;
  readonly now: Date;
}

/** Issues an enroll token: stores its digests and an audit row in one transaction. */
export async function issueEnrollToken(db: Db, input: IssueInput): Promise<{ row: EnrollTokenRow; token: string }> {
  const issued = issueToken("enroll");
  const expires = expiresAt(input.now, input.ttlSeconds);
  const row = await inTransaction(db, async (tx) => {
    const [row] = await tx.$queryRaw<EnrollTokenRow[]>`
      INSERT INTO enroll_tokens (id, tenant_id, owner_subject_id, label, lookup_digest, verifier_digest, created_at, expires_at)
      VALUES (${randomUUID()}::uuid, ${input.tenantId}::uuid, ${input.ownerSubjectId}::uuid, ${input.label},
        ${issued.lookupDigest}, ${issued.verifierDigest}, ${input.now}, ${expires})
      RETURNING ${COLUMNS}`;
    if (!row) throw new StoreAnomalyError("enroll token insert returned no row");
    await writeAudit(tx, {
      type: "enroll_token_issued",
      tenantId: row.tenant_id,
      ownerSubjectId: row.owner_subject_id,
      actorId: input.actorId,
      enrollTokenId: row.id,
      detail: { ttlSeconds: input.ttlSeconds },
      at: input.now,
    });
    return row;
  });
  return { row, token: issued.token };
}

/** Unused (not consumed, not revoked, not expired) tokens in scope, newest first, after a cursor. */
export async function listUnusedTokens(
  db: Db,
  scope: Scope & { kind: "tenant" | "owner" },
  now: Date,
  after: TimeKey | null,
  limit: number,
): Promise<EnrollTokenRow[]> {
  const owner = scope.kind === "owner" ? Prisma.sql`AND owner_subject_id = ${scope.subjectId}::uuid` : Prisma.empty;
  const cursor = after ? Prisma.sql`AND (created_at, id) < (${after.at}, ${after.id}::uuid)` : Prisma.empty;
  return db.$queryRaw<EnrollTokenRow[]>`
    SELECT ${COLUMNS} FROM enroll_tokens
    WHERE tenant_id = ${scope.tenantId}::uuid ${owner}
      AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at > ${now} ${cursor}
    ORDER BY created_at DESC, id DESC LIMIT ${limit}`;
}

/** Revokes an unused token; idempotent on a revoked one. */
export async function revokeEnrollToken(
  db: Db,
  scope: Scope,
  id: string,
  actorId: string,
  now: Date,
): Promise<EnrollTokenRow> {
  return inTransaction(db, async (tx) => {
    const [row] = await tx.$queryRaw<EnrollTokenRow[]>`
      SELECT ${COLUMNS} FROM enroll_tokens WHERE id = ${id}::uuid FOR UPDATE`;
    if (!row || !canSee(scope, ownedToken(row))) {
      throw new NotFoundError(`enroll token ${id} not found`);
    }
    if (row.consumed_at) throw new FailedPreconditionError(`enroll token ${id} was already consumed`);
    if (row.revoked_at) return row;
    const [revoked] = await tx.$queryRaw<EnrollTokenRow[]>`
      UPDATE enroll_tokens SET revoked_at = ${now} WHERE id = ${id}::uuid RETURNING ${COLUMNS}`;
    if (!revoked) throw new StoreAnomalyError("locked enroll token vanished");
    await writeAudit(tx, {
      type: "enroll_token_revoked",
      tenantId: row.tenant_id,
      ownerSubjectId: row.owner_subject_id,
      actorId,
      enrollTokenId: row.id,
      at: now,
    });
    return revoked;
  });
}

/**
 * True when `subjectId` has acted or owned something in the tenant's device records (its audit
 * trail): the subjects this context knows belong to the tenant. The directory of users and
 * clients lives in cube; until device can ask it, a USER may name only these subjects.
 */
export async function knownSubject(db: Db, tenantId: string, subjectId: string): Promise<boolean> {
  const [row] = await db.$queryRaw<{ known: boolean }[]>`
    SELECT EXISTS (
      SELECT 1 FROM audit_events
      WHERE tenant_id = ${tenantId}::uuid AND (owner_subject_id = ${subjectId}::uuid OR actor_id = ${subjectId})
    ) AS known`;
  return row?.known === true;
}
