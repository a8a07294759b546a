import {
  bearerToken,
  type CallContext,
  InvalidArgumentError,
  PermissionDeniedError,
  type Principal,
} from "@unimatrix/service-kit";

type Metadata = CallContext["metadata"];

/** A principal that acts inside a tenant. */
export interface TenantPrincipal {
  readonly kind: "user" | "client" | "machine";
  readonly subjectId: string;
  readonly tenantId: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

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

/** A canonical lowercase UUID from a request field, or INVALID_ARGUMENT naming it. */
export function requireUuid(field: string, value: string): string {
  if (value === "") throw new InvalidArgumentError(field, "is required");
  if (!UUID.test(value)) throw new InvalidArgumentError(field, "must be a canonical lowercase UUID");
  return value;
}

/** The raw bearer token of a call, if it carries one (and no signed principal). */
export function rawBearer(metadata: Metadata): string | null {
  if (metadata.get("x-umx-principal").length) return null;
  return bearerToken(metadata.get("authorization")[0]?.toString());
}
