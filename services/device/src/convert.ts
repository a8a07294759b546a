/** The one converter of the device service: stored rows and store outcomes → wire messages. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PrincipalKind, type PrincipalSchema } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import { type AuditEventSchema, AuditEventType } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import {
  BeginRunOutcome,
  EndRunOutcome,
  PlaceSessionOutcome,
  RebindSessionOutcome,
} from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import {
  DevicePlatform,
  type DeviceSchema,
  DeviceStatus,
  type EnrollTokenSchema,
  type PlacementSchema,
} from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { AUDIT_TYPES, type AuditType, PLATFORMS } from "./rules/catalog";
import { onlineAt } from "./rules/leases";
import type { RebindOutcome } from "./rules/placement";
import type { AuditRow, DeviceRow, EnrollTokenRow, PlacementRow } from "./store/rows";

const ts = (date: Date | null) => (date ? timestampFromDate(date) : undefined);

/** The wire value of a stored platform (UNSPECIFIED for a name outside the closed set). */
export function platformToWire(name: string): DevicePlatform {
  const entry = Object.entries(PLATFORMS).find(([, stored]) => stored === name);
  return entry ? (Number(entry[0]) as DevicePlatform) : DevicePlatform.UNSPECIFIED;
}

/** A device row on the wire; `online` is judged at `now` (a lease past its expiry is offline). */
export function toDevice(row: DeviceRow, now: Date): MessageInitShape<typeof DeviceSchema> {
  const live = onlineAt(row, now);
  return {
    id: row.id,
    owner: { tenantId: row.tenant_id, subjectId: row.owner_subject_id },
    publicKey: row.public_key,
    platform: platformToWire(row.platform),
    displayName: row.display_name,
    status: row.status === "active" ? DeviceStatus.ACTIVE : DeviceStatus.REVOKED,
    revokedReason: row.revoked_reason ?? "",
    revokedAt: ts(row.revoked_at),
    connectionGeneration: row.connection_generation,
    leaseExpiresAt: live ? ts(row.lease_expires_at) : undefined,
    online: live,
    rev: row.rev,
    enrolledAt: ts(row.enrolled_at),
    updatedAt: ts(row.updated_at),
  };
}

/** The principal a device credential authenticates as. */
export function toDevicePrincipal(row: DeviceRow): MessageInitShape<typeof PrincipalSchema> {
  return {
    kind: PrincipalKind.DEVICE,
    tenantId: row.tenant_id,
    subjectId: row.id,
    credentialId: row.id,
    displayName: row.display_name,
  };
}

/** An enroll token row on the wire (never its digests). */
export function toEnrollToken(row: EnrollTokenRow): MessageInitShape<typeof EnrollTokenSchema> {
  return {
    id: row.id,
    owner: { tenantId: row.tenant_id, subjectId: row.owner_subject_id },
    label: row.label,
    createdAt: ts(row.created_at),
    expiresAt: ts(row.expires_at),
    consumedAt: ts(row.consumed_at),
    consumedByPublicKey: row.consumed_by_public_key ?? "",
    revokedAt: ts(row.revoked_at),
  };
}

/** A placement row on the wire. */
export function toPlacement(row: PlacementRow): MessageInitShape<typeof PlacementSchema> {
  return {
    rootSessionId: row.root_session_id,
    deviceId: row.device_id,
    owner: { tenantId: row.tenant_id, subjectId: row.owner_subject_id },
    rev: row.rev,
    placedAt: ts(row.placed_at),
    updatedAt: ts(row.updated_at),
    activeRunId: row.active_run_id ?? "",
  };
}

/** Stored audit type → wire enum (the wire enum lists the same closed set, in the same order). */
export function auditTypeToWire(type: string): AuditEventType {
  const index = AUDIT_TYPES.indexOf(type as AuditType);
  return index < 0 ? AuditEventType.UNSPECIFIED : ((index + 1) as AuditEventType);
}

/** An audit row on the wire. */
export function toAuditEvent(row: AuditRow): MessageInitShape<typeof AuditEventSchema> {
  return {
    id: row.id,
    eventType: auditTypeToWire(row.event_type),
    deviceId: row.device_id ?? "",
    owner: { tenantId: row.tenant_id, subjectId: row.owner_subject_id },
    actorId: row.actor_id,
    rootSessionId: row.root_session_id,
    enrollTokenId: row.enroll_token_id ?? "",
    detailJson: typeof row.detail === "string" ? row.detail : JSON.stringify(row.detail ?? {}),
    at: timestampFromDate(row.at),
  };
}

/** PlaceSession outcomes on the wire. */
export const PLACE_OUTCOME = {
  bound: PlaceSessionOutcome.BOUND,
  same: PlaceSessionOutcome.SAME,
  device_conflict: PlaceSessionOutcome.DEVICE_CONFLICT,
  device_not_found: PlaceSessionOutcome.DEVICE_NOT_FOUND,
  device_revoked: PlaceSessionOutcome.DEVICE_REVOKED,
} as const;

/** RebindSession outcomes on the wire. */
export const REBIND_OUTCOME = {
  rebound: RebindSessionOutcome.REBOUND,
  idempotent: RebindSessionOutcome.IDEMPOTENT,
  rev_conflict: RebindSessionOutcome.REV_CONFLICT,
  active_run: RebindSessionOutcome.ACTIVE_RUN,
  gone: RebindSessionOutcome.GONE,
  device_not_found: RebindSessionOutcome.DEVICE_NOT_FOUND,
  device_revoked: RebindSessionOutcome.DEVICE_REVOKED,
} as const satisfies Record<RebindOutcome, RebindSessionOutcome>;

/** BeginRun outcomes on the wire. */
export const BEGIN_OUTCOME = {
  begun: BeginRunOutcome.BEGUN,
  already_active: BeginRunOutcome.ALREADY_ACTIVE,
  busy: BeginRunOutcome.BUSY,
  gone: BeginRunOutcome.GONE,
} as const;

/** EndRun outcomes on the wire. */
export const END_OUTCOME = {
  ended: EndRunOutcome.ENDED,
  not_active: EndRunOutcome.NOT_ACTIVE,
  other_run: EndRunOutcome.OTHER_RUN,
  gone: EndRunOutcome.GONE,
} as const;
