import { randomUUID } from "node:crypto";
import { AlreadyExistsError, FailedPreconditionError, NotFoundError } from "@unimatrix/service-kit";
import { issueToken, type ParsedToken, type Principal, sha256, verifySecret } from "@unimatrix/service-kit/auth";
import { isUniqueViolation } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { authTag, principalTags } from "./auth-cache";
import { bytes, inTransaction, type Tx } from "./prisma";
import type { ApiClient, ResolvedToken, Tenant, User } from "./rows";

/** Creates a tenant and its first user with a token. ALREADY_EXISTS for a taken name. */
export async function createTenant(
  deps: CubeDeps,
  name: string,
  adminName: string,
): Promise<{ tenant: Tenant; user: User; token: string }> {
  await deps.guard.admit(name.length + adminName.length + 200);
  const now = deps.clock.now();
  try {
    return await inTransaction(deps.prisma, async (tx) => {
      const tenant = await tx.tenant.create({ data: { id: randomUUID(), name, createdAt: now } });
      const user = await tx.user.create({
        data: { id: randomUUID(), tenantId: tenant.id, displayName: adminName, createdAt: now },
      });
      const token = await addUserToken(tx, user, now);
      return { tenant, user, token };
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new AlreadyExistsError("a tenant with that name exists");
    throw error;
  }
}

async function addUserToken(tx: Tx, user: User, now: Date): Promise<string> {
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

/** Creates a user (or another token for an existing one) in a tenant. */
export async function issueUserToken(
  deps: CubeDeps,
  tenantId: string,
  request: { userId?: string; displayName?: string },
): Promise<{ user: User; token: string }> {
  await deps.guard.admit((request.displayName?.length ?? 0) + 200);
  const now = deps.clock.now();
  return inTransaction(deps.prisma, async (tx) => {
    let user: User | null;
    if (request.userId) {
      user = await tx.user.findFirst({ where: { id: request.userId, tenantId } });
      if (!user) throw new NotFoundError("user not found");
    } else {
      user = await tx.user.create({
        data: { id: randomUUID(), tenantId, displayName: request.displayName ?? "", createdAt: now },
      });
    }
    return { user, token: await addUserToken(tx, user, now) };
  });
}

/** Creates an API client with a fresh credential. ALREADY_EXISTS when an active client has the name. */
export async function issueClient(
  deps: CubeDeps,
  tenantId: string,
  name: string,
): Promise<{ client: ApiClient; token: string }> {
  await deps.guard.admit(name.length + 200);
  const now = deps.clock.now();
  const issued = issueToken("client");
  try {
    const client = await deps.prisma.apiClient.create({
      data: {
        id: randomUUID(),
        tenantId,
        name,
        credentialId: randomUUID(),
        lookupDigest: bytes(issued.lookupDigest),
        verifierDigest: bytes(issued.verifierDigest),
        credentialIssuedAt: now,
        createdAt: now,
      },
    });
    return { client, token: issued.token };
  } catch (error) {
    if (isUniqueViolation(error)) throw new AlreadyExistsError("an active client with that name exists");
    throw error;
  }
}

/** Revokes every live drone session of a client; returns the count and the cubes touched. */
async function revokeSessionsOfClient(
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
async function cubesOfClient(tx: Tx, clientId: string): Promise<string[]> {
  const grants = await tx.cubeGrant.findMany({ where: { clientId }, select: { cubeId: true } });
  return grants.map((g) => g.cubeId);
}

async function lockClient(tx: Tx, tenantId: string, clientId: string): Promise<ApiClient> {
  const locked = await tx.$queryRaw<{ id: string }[]>`
    SELECT id::text FROM clients WHERE id = ${clientId}::uuid AND tenant_id = ${tenantId}::uuid FOR UPDATE`;
  if (locked.length === 0) throw new NotFoundError("client not found");
  return tx.apiClient.findUniqueOrThrow({ where: { id: clientId } });
}

/** Replaces a client's credential and revokes all its drone sessions, in one transaction. */
export async function rotateClient(
  deps: CubeDeps,
  tenantId: string,
  clientId: string,
): Promise<OpResult<{ client: ApiClient; token: string; revoked: number }>> {
  const now = deps.clock.now();
  const issued = issueToken("client");
  const result = await inTransaction(deps.prisma, async (tx) => {
    const existing = await lockClient(tx, tenantId, clientId);
    if (existing.revokedAt) throw new FailedPreconditionError("client is revoked");
    const client = await tx.apiClient.update({
      where: { id: clientId },
      data: {
        credentialId: randomUUID(),
        lookupDigest: bytes(issued.lookupDigest),
        verifierDigest: bytes(issued.verifierDigest),
        credentialIssuedAt: now,
      },
    });
    const revoked = await revokeSessionsOfClient(tx, clientId, now);
    return { client, revoked, cubes: [...revoked.cubes, ...(await cubesOfClient(tx, clientId))] };
  });
  return {
    result: { client: result.client, token: issued.token, revoked: result.revoked.count },
    effects: { authTags: [authTag.client(clientId)], access: { cubeIds: result.cubes, subjectIds: [clientId] } },
  };
}

/** Revokes a client and all its drone sessions. Idempotent. */
export async function revokeClient(deps: CubeDeps, tenantId: string, clientId: string): Promise<OpResult<ApiClient>> {
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    const existing = await lockClient(tx, tenantId, clientId);
    if (existing.revokedAt) return { client: existing, cubes: [] as string[] };
    const client = await tx.apiClient.update({ where: { id: clientId }, data: { revokedAt: now } });
    const revoked = await revokeSessionsOfClient(tx, clientId, now);
    return { client, cubes: [...revoked.cubes, ...(await cubesOfClient(tx, clientId))] };
  });
  return {
    result: result.client,
    effects: { authTags: [authTag.client(clientId)], access: { cubeIds: result.cubes, subjectIds: [clientId] } },
  };
}

/** Resolves a user, client or drone token to a principal; null when unknown, revoked or expired. */
export async function resolveToken(deps: CubeDeps, parsed: ParsedToken): Promise<ResolvedToken | null> {
  const { lookup, secret } = parsed;
  const digest = sha256(lookup);
  const now = deps.clock.now();
  switch (parsed.kind) {
    case "user": {
      const token = await deps.prisma.userToken.findUnique({ where: { lookupDigest: bytes(digest) } });
      if (!token || token.revokedAt || !verifySecret(secret, token.verifierDigest)) return null;
      const user = await deps.prisma.user.findUnique({ where: { id: token.userId } });
      if (!user) return null;
      return {
        principal: { kind: "user", subjectId: user.id, tenantId: user.tenantId },
        credentialId: token.id,
        displayName: user.displayName,
      };
    }
    case "client": {
      // Raw, not Prisma: every call of a client credential resolves here.
      const [client] = await deps.fast.$queryRaw<
        { id: string; tenant_id: string; credential_id: string; name: string; verifier_digest: Uint8Array }[]
      >`
        SELECT id::text, tenant_id::text, credential_id::text, name, verifier_digest
        FROM clients WHERE lookup_digest = ${bytes(digest)} AND revoked_at IS NULL`;
      if (!client || !verifySecret(secret, client.verifier_digest)) return null;
      return {
        principal: { kind: "client", subjectId: client.id, tenantId: client.tenant_id },
        credentialId: client.credential_id,
        displayName: client.name,
      };
    }
    case "drone": {
      const [session] = await deps.fast.$queryRaw<
        {
          id: string;
          tenant_id: string;
          client_id: string;
          cube_id: string;
          drone_id: string;
          verifier_digest: Uint8Array;
          expires_at: Date;
          label: string;
        }[]
      >`
        SELECT s.id::text, s.tenant_id::text, s.client_id::text, s.cube_id::text, s.drone_id::text,
               s.verifier_digest, s.expires_at, d.label
        FROM drone_sessions s
        JOIN drones d ON d.id = s.drone_id AND d.evicted_at IS NULL
        JOIN clients c ON c.id = s.client_id AND c.revoked_at IS NULL
        WHERE s.lookup_digest = ${bytes(digest)} AND s.revoked_at IS NULL AND s.expires_at > ${now}`;
      if (!session || !verifySecret(secret, session.verifier_digest)) return null;
      return {
        principal: {
          kind: "drone-session",
          subjectId: session.id,
          tenantId: session.tenant_id,
          clientId: session.client_id,
          cubeId: session.cube_id,
          droneId: session.drone_id,
        },
        credentialId: session.id,
        displayName: session.label,
        expiresAt: session.expires_at,
      };
    }
    default:
      return null;
  }
}

/**
 * `resolveToken` through the replica's auth cache (keyed by a digest of the whole token, so a wrong
 * secret never hits): no round trip in the common case; revocation, rotation and eviction drop the
 * entry on every replica through the bus, and a drone session's entry ends with the session.
 */
export async function resolveTokenCached(
  deps: CubeDeps,
  parsed: ParsedToken,
  raw: string,
): Promise<ResolvedToken | null> {
  return deps.auth.tokens.through(sha256(raw).toString("base64url"), async () => {
    const resolved = await resolveToken(deps, parsed);
    if (!resolved) return null;
    return {
      value: resolved,
      tags: principalTags(resolved.principal),
      ...(resolved.expiresAt ? { expiresAt: resolved.expiresAt.getTime() } : {}),
    };
  });
}

/** True when a drone session is unrevoked, unexpired, its drone not evicted and its client active. */
export async function sessionUsable(deps: Pick<CubeDeps, "prisma">, sessionId: string, now: Date): Promise<boolean> {
  const rows = await deps.prisma.$queryRaw<{ ok: boolean }[]>`
    SELECT true AS ok FROM drone_sessions s
    JOIN drones d ON d.id = s.drone_id
    JOIN clients c ON c.id = s.client_id
    WHERE s.id = ${sessionId}::uuid AND s.revoked_at IS NULL AND s.expires_at > ${now}
      AND d.evicted_at IS NULL AND c.revoked_at IS NULL`;
  return rows.length > 0;
}

/** A tenant's clients oldest first (only `own` when set), one more than `limit` to tell a next page. */
export function listClients(
  deps: CubeDeps,
  tenantId: string,
  filter: { own?: string; includeRevoked: boolean },
  offset: number,
  limit: number,
): Promise<ApiClient[]> {
  return deps.prisma.apiClient.findMany({
    where: {
      tenantId,
      ...(filter.own ? { id: filter.own } : {}),
      ...(filter.includeRevoked ? {} : { revokedAt: null }),
    },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    skip: offset,
    take: limit + 1,
  });
}

/** Why a principal's credential no longer works (a reason), or null while it still does (for a client, still `credentialId` when given). */
export async function revokedReason(
  deps: CubeDeps,
  principal: Principal,
  credentialId?: string,
): Promise<string | null> {
  if (principal.kind === "drone-session") {
    return (await sessionUsable(deps, principal.subjectId, deps.clock.now())) ? null : "drone session revoked";
  }
  if (principal.kind === "client") {
    const client = await deps.prisma.apiClient.findUnique({ where: { id: principal.subjectId } });
    if (!client || client.revokedAt) return "client revoked";
    return credentialId !== undefined && client.credentialId !== credentialId ? "client credential rotated" : null;
  }
  return null;
}

/** The credential a client principal's stream is opened with (a later rotation ends the stream); none for other kinds. */
export async function streamCredential(deps: CubeDeps, principal: Principal): Promise<string | undefined> {
  if (principal.kind !== "client") return undefined;
  return (await deps.prisma.apiClient.findUnique({ where: { id: principal.subjectId } }))?.credentialId;
}
