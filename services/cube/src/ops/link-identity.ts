/**
 * The external-identity write paths: LinkIdentity and UnlinkIdentity.
 *
 * Lock order: linking — the target client row (`FOR UPDATE`, so a concurrent revoke cannot slip
 * between the check and the insert) or the user row read, then the new link (the primary key
 * (issuer, subject) decides a race); unlinking — the link row alone (one DELETE).
 */

import { AlreadyExistsError, NotFoundError } from "@unimatrix/service-kit/errors";
import { isUniqueViolation } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { authTag } from "../store/auth-cache";
import { inTransaction } from "../store/prisma";
import {
  deleteExternalIdentity,
  type ExternalIdentityRow,
  insertExternalIdentity,
} from "../tables/external-identities";
import { lockClient, userOfTenant } from "../tables/identity";

/** What a subject is linked to: a client or a user of the caller's tenant. */
export type LinkTarget = { readonly clientId: string } | { readonly userId: string };

/** Links the provider's `subject` to a client or user of `tenantId`. No effects (nothing cached names it yet). */
export async function linkIdentity(
  deps: CubeDeps,
  tenantId: string,
  issuer: string,
  subject: string,
  target: LinkTarget,
): Promise<OpResult<ExternalIdentityRow>> {
  await deps.guard.admit(issuer.length + subject.length + 200);
  const now = deps.clock.now();
  try {
    const result = await inTransaction(deps.prisma, async (tx) => {
      if ("clientId" in target) {
        const client = await lockClient(tx, tenantId, target.clientId);
        if (client.revokedAt) throw new NotFoundError("client not found");
      } else if (!(await userOfTenant(tx, tenantId, target.userId))) {
        throw new NotFoundError("user not found");
      }
      return insertExternalIdentity(tx, {
        issuer,
        subject,
        tenantId,
        clientId: "clientId" in target ? target.clientId : null,
        userId: "userId" in target ? target.userId : null,
        createdAt: now,
      });
    });
    return { result, effects: {} };
  } catch (error) {
    if (isUniqueViolation(error)) throw new AlreadyExistsError("that subject is linked already");
    throw error;
  }
}

/**
 * Removes a link of `tenantId`. Its target's cached answers are dropped on every replica and the
 * streams opened with the provider's tokens re-check (and end). Idempotent.
 */
export async function unlinkIdentity(
  deps: CubeDeps,
  tenantId: string,
  issuer: string,
  subject: string,
): Promise<OpResult<boolean>> {
  const removed = await inTransaction(deps.prisma, (tx) => deleteExternalIdentity(tx, tenantId, issuer, subject));
  if (!removed) return { result: false, effects: {} };
  const tag = removed.clientId ? authTag.client(removed.clientId) : authTag.user(removed.userId ?? "");
  return { result: true, effects: { authTags: [tag] } };
}
