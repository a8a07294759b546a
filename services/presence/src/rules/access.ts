import { bearerToken, PRINCIPAL_HEADER, type Principal } from "@unimatrix/service-kit/auth";
import { PermissionDeniedError } from "@unimatrix/service-kit/errors";
import type { CallContext } from "@unimatrix/service-kit/grpc";

type Metadata = CallContext["metadata"];

/** A principal that acts inside a tenant. */
export interface TenantPrincipal {
  readonly kind: "user" | "client" | "machine";
  readonly subjectId: string;
  readonly tenantId: string;
}

/**
 * The principal if it is one of `kinds`; operators (no tenant) and every other kind get
 * PERMISSION_DENIED.
 */
export function requireTenant(principal: Principal, kinds: readonly TenantPrincipal["kind"][]): TenantPrincipal {
  if (principal.kind === "operator") {
    throw new PermissionDeniedError("operator principals have no tenant; call as a user or client of the tenant");
  }
  if (!(kinds as readonly string[]).includes(principal.kind)) {
    throw new PermissionDeniedError(`${principal.kind} principals may not call this method`);
  }
  return principal as TenantPrincipal;
}

/** The caller of a link: a machine principal (its own link), else PERMISSION_DENIED. */
export function requireMachine(principal: Principal): TenantPrincipal {
  if (principal.kind !== "machine") throw new PermissionDeniedError("only a machine principal may open its link");
  return { kind: "machine", subjectId: principal.subjectId, tenantId: principal.tenantId };
}

/** The raw bearer token of a call, if it carries one (and no signed principal): what a watch re-resolves. */
export function rawBearer(metadata: Metadata): string | null {
  if (metadata.get(PRINCIPAL_HEADER).length) return null;
  return bearerToken(metadata.get("authorization")[0]?.toString());
}
