/** Credentials: token → principal (cached), whether a credential still works, and the tenant's clients. */
import { type ParsedToken, type Principal, sha256, verifySecret } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import { principalTags } from "../store/auth-cache";
import { bytes } from "../store/prisma";
import type { ApiClient, ResolvedToken } from "../store/rows";

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
async function sessionUsable(deps: Pick<CubeDeps, "prisma">, sessionId: string, now: Date): Promise<boolean> {
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
