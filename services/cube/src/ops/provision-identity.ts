/**
 * The provisioning write path (ProvisionIdentity): a person the identity provider signed in, linked
 * to nothing yet, becomes a user of the provisioning tenant.
 *
 * Lock order: the tenant row (`FOR SHARE`: it must exist), then the new user, then the new link;
 * the link's primary key (issuer, subject) decides a race between two first sign-ins (the loser's
 * transaction rolls back, and it answers the winner's user).
 */

import { FailedPreconditionError } from "@unimatrix/service-kit/errors";
import { isUniqueViolation } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { inTransaction } from "../store/prisma";
import { insertExternalIdentity, type LinkedSubject, linkedSubject } from "../tables/external-identities";
import { insertUser } from "../tables/identity";

/** Creates a user of the tenant named `tenantName` named `displayName` and links `subject` to it; answers the subject's user. No effects. */
export async function provisionIdentity(
  deps: CubeDeps,
  tenantName: string,
  issuer: string,
  subject: string,
  displayName: string,
): Promise<OpResult<{ user: LinkedSubject; created: boolean }>> {
  await deps.guard.admit(issuer.length + subject.length + displayName.length + 400);
  const now = deps.clock.now();
  try {
    const user = await inTransaction(deps.prisma, async (tx) => {
      const [tenant] = await tx.$queryRaw<{ id: string }[]>`
        SELECT id::text FROM tenants WHERE name = ${tenantName} FOR SHARE`;
      if (!tenant) throw new FailedPreconditionError("the provisioning tenant does not exist");
      const tenantId = tenant.id;
      const created = await insertUser(tx, tenantId, displayName, now);
      await insertExternalIdentity(tx, {
        issuer,
        subject,
        tenantId,
        clientId: null,
        userId: created.id,
        createdAt: now,
      });
      return { kind: "user" as const, id: created.id, tenantId, displayName };
    });
    return { result: { user, created: true }, effects: {} };
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    const winner = await linkedSubject(deps.prisma, issuer, [subject]);
    if (!winner) throw error;
    return { result: { user: winner, created: false }, effects: {} };
  }
}
