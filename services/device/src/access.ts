import { PermissionDeniedError, type Principal } from "@unimatrix/service-kit";

/**
 * What a caller may see and change (DESIGN §2). A USER sees its whole tenant; a CLIENT what it
 * owns (owner subject = its id); a DEVICE itself; the OPERATOR nothing (PERMISSION_DENIED). Records outside the
 * scope answer NOT_FOUND, never PERMISSION_DENIED, so nobody learns that they exist.
 */
export type Scope =
  | { readonly kind: "all" }
  | { readonly kind: "tenant"; readonly tenantId: string; readonly subjectId: string }
  | { readonly kind: "owner"; readonly tenantId: string; readonly subjectId: string }
  | { readonly kind: "device"; readonly tenantId: string; readonly deviceId: string };

/** The scope of a principal, or PERMISSION_DENIED for kinds that have no business here. */
export function scopeOf(principal: Principal, allowed: readonly Scope["kind"][]): Scope {
  const scope = toScope(principal);
  if (!scope || !allowed.includes(scope.kind)) {
    throw new PermissionDeniedError(`a ${principal.kind} principal may not call this method`);
  }
  return scope;
}

function toScope(principal: Principal): Scope | null {
  switch (principal.kind) {
    case "operator":
      // The operator manages tenants, not their data (DESIGN §2): no device RPC is open to it.
      return null;
    case "user":
      return { kind: "tenant", tenantId: principal.tenantId, subjectId: principal.subjectId };
    case "client":
      return { kind: "owner", tenantId: principal.tenantId, subjectId: principal.subjectId };
    case "device":
      return { kind: "device", tenantId: principal.tenantId, deviceId: principal.subjectId };
    default:
      return null;
  }
}

/** The record's coordinates that visibility is decided on. */
export interface Owned {
  readonly tenantId: string;
  readonly ownerSubjectId: string;
  readonly deviceId?: string | null;
}

/** True when the scope may see the record. */
export function canSee(scope: Scope, record: Owned): boolean {
  switch (scope.kind) {
    case "all":
      return true;
    case "tenant":
      return record.tenantId === scope.tenantId;
    case "owner":
      return record.tenantId === scope.tenantId && record.ownerSubjectId === scope.subjectId;
    case "device":
      return record.tenantId === scope.tenantId && record.deviceId === scope.deviceId;
  }
}

/** The subject recorded as the actor of a change. */
export function actorOf(scope: Scope): string {
  switch (scope.kind) {
    case "all":
      return "operator";
    case "device":
      return scope.deviceId;
    default:
      return scope.subjectId;
  }
}
