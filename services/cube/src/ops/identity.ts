/**
 * The identity write paths: CreateTenant, IssueUserToken, IssueClient, RotateClient, RevokeClient.
 *
 * Lock order: creating — the new rows only (a unique name decides a race); rotating and revoking —
 * the client row (`FOR UPDATE`) → its live drone sessions. One transaction each (IssueClient is
 * one insert).
 */

import { issueToken } from "@unimatrix/service-kit/auth";
import { AlreadyExistsError, FailedPreconditionError, NotFoundError } from "@unimatrix/service-kit/errors";
import { isUniqueViolation } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { authTag } from "../store/auth-cache";
import { inTransaction } from "../store/prisma";
import type { ApiClient, Tenant, User } from "../store/rows";
import {
  addUserToken,
  cubesOfClient,
  insertClient,
  insertTenant,
  insertUser,
  lockClient,
  markClientRevoked,
  replaceCredential,
  revokeSessionsOfClient,
  userOfTenant,
} from "../tables/identity";

/** Creates a tenant and its first user with a token. ALREADY_EXISTS for a taken name. No effects. */
export async function createTenant(
  deps: CubeDeps,
  name: string,
  adminName: string,
): Promise<OpResult<{ tenant: Tenant; user: User; token: string }>> {
  await deps.guard.admit(name.length + adminName.length + 200);
  const now = deps.clock.now();
  try {
    const result = await inTransaction(deps.prisma, async (tx) => {
      const tenant = await insertTenant(tx, name, now);
      const user = await insertUser(tx, tenant.id, adminName, now);
      const token = await addUserToken(tx, user, now);
      return { tenant, user, token };
    });
    return { result, effects: {} };
  } catch (error) {
    if (isUniqueViolation(error)) throw new AlreadyExistsError("a tenant with that name exists");
    throw error;
  }
}

/** Creates a user (or another token for an existing one) in a tenant. No effects. */
export async function issueUserToken(
  deps: CubeDeps,
  tenantId: string,
  request: { userId?: string; displayName?: string },
): Promise<OpResult<{ user: User; token: string }>> {
  await deps.guard.admit((request.displayName?.length ?? 0) + 200);
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    let user: User | null;
    if (request.userId) {
      user = await userOfTenant(tx, tenantId, request.userId);
      if (!user) throw new NotFoundError("user not found");
    } else {
      user = await insertUser(tx, tenantId, request.displayName ?? "", now);
    }
    return { user, token: await addUserToken(tx, user, now) };
  });
  return { result, effects: {} };
}

/** Creates an API client with a fresh credential. ALREADY_EXISTS when an active client has the name. No effects. */
export async function issueClient(
  deps: CubeDeps,
  tenantId: string,
  name: string,
): Promise<OpResult<{ client: ApiClient; token: string }>> {
  await deps.guard.admit(name.length + 200);
  const now = deps.clock.now();
  const issued = issueToken("client");
  try {
    const client = await insertClient(deps.prisma, tenantId, name, issued, now);
    return { result: { client, token: issued.token }, effects: {} };
  } catch (error) {
    if (isUniqueViolation(error)) throw new AlreadyExistsError("an active client with that name exists");
    throw error;
  }
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
    const client = await replaceCredential(tx, clientId, issued, now);
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
    const client = await markClientRevoked(tx, clientId, now);
    const revoked = await revokeSessionsOfClient(tx, clientId, now);
    return { client, cubes: [...revoked.cubes, ...(await cubesOfClient(tx, clientId))] };
  });
  return {
    result: result.client,
    effects: { authTags: [authTag.client(clientId)], access: { cubeIds: result.cubes, subjectIds: [clientId] } },
  };
}
