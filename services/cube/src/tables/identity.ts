/** Rows of `tenants`, `users`, `user_tokens`, `clients` and (revoking) `drone_sessions`. Row SQL only. */
import { randomUUID } from "node:crypto";
import { issueToken } from "@unimatrix/service-kit/auth";
import { NotFoundError } from "@unimatrix/service-kit/errors";
import { bytes, type PrismaClient, type Tx } from "../store/prisma";
import type { ApiClient, Tenant, User } from "../store/rows";

/** Inserts a tenant. */
export function insertTenant(tx: Tx, name: string, now: Date): Promise<Tenant> {
  return tx.tenant.create({ data: { id: randomUUID(), name, createdAt: now } });
}

/** Inserts a user of a tenant. */
export function insertUser(tx: Tx, tenantId: string, displayName: string, now: Date): Promise<User> {
  return tx.user.create({ data: { id: randomUUID(), tenantId, displayName, createdAt: now } });
}

/** A user of a tenant, or null. */
export function userOfTenant(db: PrismaClient | Tx, tenantId: string, userId: string): Promise<User | null> {
  return db.user.findFirst({ where: { id: userId, tenantId } });
}

/** Issues a user token (stores its digests); returns the token. */
export async function addUserToken(tx: Tx, user: User, now: Date): Promise<string> {
  const issued = issueToken("user");
  await tx.userToken.create({
    data: {
      id: randomUUID(),
      tenantId: user.tenantId,
      userId: user.id,
      lookupDigest: bytes(issued.lookupDigest),
      verifierDigest: bytes(issued.verifierDigest),
      createdAt: now,
    },
  });
  return issued.token;
}

/** A client credential's digests. */
export interface ClientCredential {
  readonly lookupDigest: Uint8Array;
  readonly verifierDigest: Uint8Array;
}

/** Inserts a client with a credential. */
export function insertClient(
  db: PrismaClient | Tx,
  tenantId: string,
  name: string,
  credential: ClientCredential,
  now: Date,
): Promise<ApiClient> {
  return db.apiClient.create({
    data: {
      id: randomUUID(),
      tenantId,
      name,
      credentialId: randomUUID(),
      lookupDigest: bytes(credential.lookupDigest),
      verifierDigest: bytes(credential.verifierDigest),
      credentialIssuedAt: now,
      createdAt: now,
    },
  });
}

/** Replaces a client's credential (a new credential id). */
export function replaceCredential(tx: Tx, clientId: string, credential: ClientCredential, now: Date) {
  return tx.apiClient.update({
    where: { id: clientId },
    data: {
      credentialId: randomUUID(),
      lookupDigest: bytes(credential.lookupDigest),
      verifierDigest: bytes(credential.verifierDigest),
      credentialIssuedAt: now,
    },
  });
}

/** Marks a client revoked. */
export function markClientRevoked(tx: Tx, clientId: string, now: Date): Promise<ApiClient> {
  return tx.apiClient.update({ where: { id: clientId }, data: { revokedAt: now } });
}

/** Revokes every live drone session of a client; returns the count and the cubes touched. */
export async function revokeSessionsOfClient(
  tx: Tx,
  clientId: string,
  now: Date,
): Promise<{ count: number; cubes: string[] }> {
  const rows = await tx.$queryRaw<{ cube_id: string }[]>`
    UPDATE drone_sessions SET revoked_at = ${now}
    WHERE client_id = ${clientId}::uuid AND revoked_at IS NULL AND expires_at > ${now}
    RETURNING cube_id::text`;
  return { count: rows.length, cubes: rows.map((r) => r.cube_id) };
}

/** Cubes where a client holds grants (their streams must re-check access). */
export async function cubesOfClient(tx: Tx, clientId: string): Promise<string[]> {
  const grants = await tx.cubeGrant.findMany({ where: { clientId }, select: { cubeId: true } });
  return grants.map((g) => g.cubeId);
}

/** A client of a tenant locked `FOR UPDATE`, else NOT_FOUND. */
export async function lockClient(tx: Tx, tenantId: string, clientId: string): Promise<ApiClient> {
  const locked = await tx.$queryRaw<{ id: string }[]>`
    SELECT id::text FROM clients WHERE id = ${clientId}::uuid AND tenant_id = ${tenantId}::uuid FOR UPDATE`;
  if (locked.length === 0) throw new NotFoundError("client not found");
  return tx.apiClient.findUniqueOrThrow({ where: { id: clientId } });
}
