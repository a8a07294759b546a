/** Row shapes of the device tables as raw SQL returns them (snake_case columns), and the store's client types. */
import type { Tx as KitTx } from "@unimatrix/service-kit/store";
import type { PrismaClient } from "../../generated/prisma/client";

/** The device store's Prisma client (generated to services/device/generated, outside src/). */
export type Db = PrismaClient;
/** The client inside one of its interactive transactions. */
export type Tx = KitTx<PrismaClient>;

/** A `devices` row. */
export interface DeviceRow {
  id: string;
  tenant_id: string;
  owner_subject_id: string;
  public_key: string;
  platform: string;
  display_name: string;
  status: "active" | "revoked";
  revoked_reason: string | null;
  revoked_at: Date | null;
  connection_generation: bigint;
  lease_expires_at: Date | null;
  online: boolean;
  rev: bigint;
  enrolled_at: Date;
  updated_at: Date;
  enroll_token_id: string;
}

/** The columns of a DeviceRow, for SELECT lists (never the credential digests). */
export const DEVICE_COLUMNS =
  "id::text, tenant_id::text, owner_subject_id::text, public_key, platform, display_name, status, revoked_reason, revoked_at, connection_generation, lease_expires_at, online, rev, enrolled_at, updated_at, enroll_token_id::text";

/** An `enroll_tokens` row (without the digests). */
export interface EnrollTokenRow {
  id: string;
  tenant_id: string;
  owner_subject_id: string;
  label: string;
  created_at: Date;
  expires_at: Date;
  consumed_at: Date | null;
  consumed_by_public_key: string | null;
  device_id: string | null;
  revoked_at: Date | null;
}

/** The columns of an EnrollTokenRow. */
export const TOKEN_COLUMNS =
  "id::text, tenant_id::text, owner_subject_id::text, label, created_at, expires_at, consumed_at, consumed_by_public_key, device_id::text, revoked_at";

/** A placement joined with its run claim. */
export interface PlacementRow {
  tenant_id: string;
  root_session_id: string;
  device_id: string;
  owner_subject_id: string;
  rev: bigint;
  placed_at: Date;
  updated_at: Date;
  active_run_id: string | null;
}

/** An `audit_events` row. */
export interface AuditRow {
  id: string;
  seq: bigint;
  tenant_id: string;
  owner_subject_id: string;
  event_type: string;
  device_id: string | null;
  actor_id: string;
  root_session_id: string;
  enroll_token_id: string | null;
  detail: unknown;
  at: Date;
}
