import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { AuditEventType } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import type {
  DeviceSchema,
  EnrollTokenSchema,
  PlacementSchema,
} from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { DeviceStatus } from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { AUDIT_TYPES, type AuditType } from "../store/audit";
import type { AuditRow, DeviceRow, EnrollTokenRow, PlacementRow } from "../store/rows";
import { platformOf } from "./validate";

const ts = (date: Date | null) => (date ? timestampFromDate(date) : undefined);

/** A device row on the wire; `online` is judged at `now` (a lease past its expiry is offline). */
export function toDevice(row: DeviceRow, now: Date): MessageInitShape<typeof DeviceSchema> {
  const live = row.status === "active" && row.lease_expires_at !== null && row.lease_expires_at > now;
  return {
    id: row.id,
    owner: { tenantId: row.tenant_id, subjectId: row.owner_subject_id },
    publicKey: row.public_key,
    platform: platformOf(row.platform),
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

/** Stored audit type ↔ wire enum (the wire enum lists the same closed set, in the same order). */
export function auditTypeToWire(type: string): AuditEventType {
  const index = AUDIT_TYPES.indexOf(type as AuditType);
  return index < 0 ? AuditEventType.UNSPECIFIED : ((index + 1) as AuditEventType);
}

/** The stored name of a wire audit type, or null for UNSPECIFIED / unknown values. */
export function auditTypeFromWire(type: AuditEventType): AuditType | null {
  return AUDIT_TYPES[type - 1] ?? null;
}

/** An audit row on the wire. */
export function toAuditEvent(row: AuditRow) {
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
