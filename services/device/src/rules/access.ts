import type { Principal } from "@unimatrix/service-kit/auth";
import { NotFoundError, PermissionDeniedError } from "@unimatrix/service-kit/errors";
import type { DeviceRow, EnrollTokenRow, PlacementRow } from "../store/rows";

/**
 * What a caller may see and change. A USER sees its whole tenant; a CLIENT what it owns (owner
 * subject = its id); a DEVICE itself; the OPERATOR nothing (it manages tenants, not their data: every
 * device RPC answers it PERMISSION_DENIED). Records outside the scope answer NOT_FOUND, never
 * PERMISSION_DENIED, so nobody learns that they exist.
 */
export type Scope =
  | { readonly kind: "tenant"; readonly tenantId: string; readonly subjectId: string }
  | { readonly kind: "owner"; readonly tenantId: string; readonly subjectId: string }
  | { readonly kind: "device"; readonly tenantId: string; readonly deviceId: string };

/** The name of a kind of scope. */
export type ScopeKind = Scope["kind"];

/** Who may call each RPC that takes a principal (EnrollDevice and Authenticate take none). */
export const CALLERS = {
  issueEnrollToken: ["tenant", "owner"],
  listEnrollTokens: ["tenant", "owner"],
  revokeEnrollToken: ["tenant", "owner"],
  getDevice: ["tenant", "owner", "device"],
  listDevices: ["tenant", "owner", "device"],
  revokeDevice: ["tenant", "owner", "device"],
  acquireConnection: ["device"],
  heartbeatConnection: ["device"],
  releaseConnection: ["device"],
  placeSession: ["tenant", "owner"],
  getPlacement: ["tenant", "owner", "device"],
  rebindSession: ["tenant", "owner"],
  beginRun: ["tenant", "owner"],
  endRun: ["tenant", "owner"],
  listAuditEvents: ["tenant", "owner"],
} as const satisfies Record<string, readonly ScopeKind[]>;

/** The scope of a principal, or PERMISSION_DENIED for kinds that have no business here. */
export function scopeOf<K extends ScopeKind>(principal: Principal, allowed: readonly K[]): Extract<Scope, { kind: K }> {
  const scope = toScope(principal);
  if (!scope || !(allowed as readonly ScopeKind[]).includes(scope.kind)) {
    throw new PermissionDeniedError(`a ${principal.kind} principal may not call this method`);
  }
  return scope as Extract<Scope, { kind: K }>;
}

function toScope(principal: Principal): Scope | null {
  switch (principal.kind) {
    case "operator":
      return null; // the operator manages tenants, not their data: no device RPC is open to it
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
    case "device":
      return scope.deviceId;
    default:
      return scope.subjectId;
  }
}

/** A device's visibility coordinates (a device "owns" itself). */
export function ownedDevice(row: DeviceRow): Owned {
  return { tenantId: row.tenant_id, ownerSubjectId: row.owner_subject_id, deviceId: row.id };
}

/** A placement's visibility coordinates (the device it is on may see it). */
export function ownedPlacement(row: PlacementRow): Owned {
  return { tenantId: row.tenant_id, ownerSubjectId: row.owner_subject_id, deviceId: row.device_id };
}

/** An enroll token's visibility coordinates (no device sees a token). */
export function ownedToken(row: EnrollTokenRow): Owned {
  return { tenantId: row.tenant_id, ownerSubjectId: row.owner_subject_id };
}

/**
 * The device whose lease a caller may hold: a DEVICE only its own (another id is NOT_FOUND).
 * `deviceId` is already a validated UUID.
 */
export function leaseHolder(scope: Extract<Scope, { kind: "device" }>, deviceId: string): string {
  if (scope.deviceId !== deviceId) throw new NotFoundError(`device ${deviceId} not found`);
  return deviceId;
}

/**
 * The owner of a new enroll token: the one named (a USER may name any subject of its tenant), or
 * the caller. A CLIENT may only issue for itself; naming anyone else is NOT_FOUND (no oracle).
 */
export function tokenOwner(scope: Extract<Scope, { kind: "tenant" | "owner" }>, named: string | null): string {
  if (named !== null && scope.kind === "owner" && named !== scope.subjectId) {
    throw new NotFoundError(`owner_subject_id ${named} not found`);
  }
  return named ?? scope.subjectId;
}

/**
 * Rows a listing may return for a scope: the tenant, the owner and the device it is narrowed to
 * (null = no narrowing). The SQL of each list applies these.
 */
export function listScope(scope: Scope): {
  readonly tenantId: string;
  readonly ownerSubjectId: string | null;
  readonly deviceId: string | null;
} {
  return {
    tenantId: scope.tenantId,
    ownerSubjectId: scope.kind === "owner" ? scope.subjectId : null,
    deviceId: scope.kind === "device" ? scope.deviceId : null,
  };
}
