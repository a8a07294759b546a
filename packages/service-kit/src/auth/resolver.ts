import type { Metadata } from "@grpc/grpc-js";
import { UnauthenticatedError } from "../errors";
import type { Authenticate, CallScope } from "../grpc/call";
import { looksLikeJwt } from "./access-tokens";
import { bearerToken, PRINCIPAL_HEADER, type Principal, verifyPrincipal } from "./principal";
import { constantTimeEquals, type ParsedToken, parseToken } from "./tokens";

/** How a service turns call metadata into a principal. */
export interface PrincipalResolverOptions {
  /** Key that verifies principals signed by the gateway. */
  readonly internalKey: string;
  /** The operator token from config, if any. */
  readonly operatorToken?: string | undefined;
  /**
   * Resolves a bearer token of any other kind: the service's own tokens locally, others through
   * the owning service's `Authenticate` (bounded by the caller's `scope`). Returns null for an
   * unknown or revoked token.
   */
  readonly resolveToken?: (token: ParsedToken, raw: string, scope?: CallScope) => Promise<Principal | null>;
  /**
   * Resolves a JWT access token of the configured identity provider (absent: such tokens are
   * refused). Throws UNAUTHENTICATED naming what failed; null when its subject is not linked.
   */
  readonly resolveAccessToken?: (raw: string) => Promise<Principal | null>;
  readonly now?: () => number;
}

const OPERATOR: Principal = { kind: "operator", subjectId: "operator", tenantId: null };

/**
 * The principal of a call: a signed principal from the gateway, or a bearer token.
 * A principal is never taken from unsigned metadata or from a request body.
 */
export function principalResolver(options: PrincipalResolverOptions): Authenticate {
  return async (metadata: Metadata, scope?: CallScope) => {
    const signed = metadata.get(PRINCIPAL_HEADER)[0];
    if (signed !== undefined) {
      const principal = verifyPrincipal(signed.toString(), options.internalKey, options.now?.() ?? Date.now());
      if (!principal) throw new UnauthenticatedError("signed principal is invalid or expired");
      return principal;
    }
    const raw = bearerToken(metadata.get("authorization")[0]?.toString());
    if (!raw) throw new UnauthenticatedError("missing bearer token");
    // The operator token comes from config and may have any shape after its prefix.
    if (raw.startsWith("umx_operator_")) {
      if (options.operatorToken && constantTimeEquals(raw, options.operatorToken)) return OPERATOR;
      throw new UnauthenticatedError("invalid credential");
    }
    const parsed = parseToken(raw);
    if (!parsed && options.resolveAccessToken && looksLikeJwt(raw)) {
      const principal = await options.resolveAccessToken(raw);
      if (!principal) throw new UnauthenticatedError("invalid credential");
      return principal;
    }
    if (!parsed) throw new UnauthenticatedError("malformed bearer token");
    const principal = options.resolveToken ? await options.resolveToken(parsed, raw, scope) : null;
    if (!principal) throw new UnauthenticatedError("invalid credential");
    return principal;
  };
}
