/** Rows of `external_identities`: the provider's subjects linked to a client or a user. Row SQL only. */
import type { PrismaClient, Tx } from "../store/prisma";

/** A stored link. */
export interface ExternalIdentityRow {
  readonly issuer: string;
  readonly subject: string;
  readonly tenantId: string;
  readonly clientId: string | null;
  readonly userId: string | null;
  readonly createdAt: Date;
}

/** Inserts a link (a taken (issuer, subject) is a unique violation). */
export function insertExternalIdentity(tx: Tx, row: ExternalIdentityRow): Promise<ExternalIdentityRow> {
  return tx.externalIdentity.create({ data: row });
}

/** Deletes a tenant's link; the row deleted, or null when there was none. */
export async function deleteExternalIdentity(
  tx: Tx,
  tenantId: string,
  issuer: string,
  subject: string,
): Promise<ExternalIdentityRow | null> {
  const [row] = await tx.$queryRaw<{ client_id: string | null; user_id: string | null; created_at: Date }[]>`
    DELETE FROM external_identities WHERE issuer = ${issuer} AND subject = ${subject} AND tenant_id = ${tenantId}::uuid
    RETURNING client_id::text, user_id::text, created_at`;
  if (!row) return null;
  return { issuer, subject, tenantId, clientId: row.client_id, userId: row.user_id, createdAt: row.created_at };
}

/** What a linked subject acts as now: an active client (with its name) or a user; none when unlinked or revoked. */
export interface LinkedSubject {
  readonly kind: "client" | "user";
  readonly id: string;
  readonly tenantId: string;
  readonly displayName: string;
}

/**
 * The first of `subjects` (one or two, in order) linked under `issuer` to an active client or a user. One
 * statement: the link and its target are read together, so a revoked client is never answered.
 */
export async function linkedSubject(
  db: PrismaClient,
  issuer: string,
  subjects: readonly [string] | readonly [string, string],
): Promise<LinkedSubject | null> {
  const [first, second = first] = subjects;
  const rows = await db.$queryRaw<
    { subject: string; kind: "client" | "user"; id: string; tenant_id: string; display_name: string }[]
  >`
    SELECT e.subject, 'client' AS kind, c.id::text, c.tenant_id::text, c.name AS display_name
    FROM external_identities e JOIN clients c ON c.id = e.client_id AND c.tenant_id = e.tenant_id AND c.revoked_at IS NULL
    WHERE e.issuer = ${issuer} AND e.subject IN (${first}, ${second})
    UNION ALL
    SELECT e.subject, 'user' AS kind, u.id::text, u.tenant_id::text, u.display_name
    FROM external_identities e JOIN users u ON u.id = e.user_id AND u.tenant_id = e.tenant_id
    WHERE e.issuer = ${issuer} AND e.subject IN (${first}, ${second})`;
  for (const subject of subjects) {
    const row = rows.find((r) => r.subject === subject);
    if (row) return { kind: row.kind, id: row.id, tenantId: row.tenant_id, displayName: row.display_name };
  }
  return null;
}
