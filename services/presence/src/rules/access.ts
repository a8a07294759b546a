import {
  bearerToken,
  type CallContext,
  InvalidArgumentError,
  PermissionDeniedError,
  type Principal,
  parseToken,
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

/** The caller of a link: a machine principal (its own link), else PERMISSION_DENIED. */
export function requireMachine(principal: Principal): TenantPrincipal {
  if (principal.kind !== "machine") throw new PermissionDeniedError("only a machine principal may open its link");
  return { kind: "machine", subjectId: principal.subjectId, tenantId: principal.tenantId };
}

/** A canonical lowercase UUID from a request field, or INVALID_ARGUMENT naming it. */
export function requireUuid(field: string, value: string): string {
  if (value === "") throw new InvalidArgumentError(field, "is required");
  if (!UUID.test(value)) throw new InvalidArgumentError(field, "must be a canonical lowercase UUID");
  return value;
}

/**
 * The credential a call is made with, for per-credential limits: the bearer token's lookup part,
 * or for a signed principal its kind and subject.
 */
export function credentialKey(principal: Principal, metadata: Metadata): string {
  const raw = bearerToken(metadata.get("authorization")[0]?.toString());
  const parsed = raw ? parseToken(raw) : null;
  if (parsed && !metadata.get("x-umx-principal").length) return `${parsed.kind}:${parsed.lookup}`;
  return `${principal.kind}:${principal.subjectId}`;
}

/** The raw bearer token of a call, if it carries one (and no signed principal). */
export function rawBearer(metadata: Metadata): string | null {
  if (metadata.get("x-umx-principal").length) return null;
  return bearerToken(metadata.get("authorization")[0]?.toString());
}
