/** The company's identity provider's access tokens → the client or user their subject is linked to (cached). */
import { type AccessToken, type AccessTokenVerifier, type Principal, sha256 } from "@unimatrix/service-kit/auth";
import { UnauthenticatedError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import { principalTags } from "../store/auth-cache";
import type { ResolvedToken } from "../store/rows";
import { linkedSubject } from "../tables/external-identities";

/**
 * Verifies an access token (signature, issuer, audience, expiry, scope: UNAUTHENTICATED naming
 * what failed) and resolves the subject it names: its `sub`, else its `client_id`, linked to an
 * active client or a user. Null when neither is linked (or the client is revoked). The answer is
 * cached like a Unimatrix token's — dropped on every replica when its client or user changes, and
 * never kept past the token's `exp`, which the principal carries.
 */
export async function resolveAccessToken(
  deps: CubeDeps,
  verifier: AccessTokenVerifier,
  raw: string,
): Promise<ResolvedToken | null> {
  return linkedPrincipal(deps, await verifier.verify(raw), raw);
}

/** The client or user a verified token's subject is linked to (cached as `resolveAccessToken` says); null when none. */
export async function linkedPrincipal(deps: CubeDeps, token: AccessToken, raw: string): Promise<ResolvedToken | null> {
  const subjects = [token.subject, token.clientId].filter((s): s is string => s !== undefined);
  if (subjects.length === 0) throw new UnauthenticatedError("access token names no subject or client");
  return deps.auth.tokens.through(`jwt:${sha256(raw).toString("base64url")}`, async () => {
    const linked = await linkedSubject(deps.prisma, token.issuer, subjects as [string] | [string, string]);
    if (!linked) return null;
    const principal: Principal = {
      kind: linked.kind,
      subjectId: linked.id,
      tenantId: linked.tenantId,
      expiresAt: token.expiresAt,
    };
    const resolved: ResolvedToken = {
      principal,
      credentialId: "",
      displayName: linked.displayName,
      expiresAt: new Date(token.expiresAt),
    };
    return { value: resolved, tags: principalTags(principal), expiresAt: token.expiresAt };
  });
}
