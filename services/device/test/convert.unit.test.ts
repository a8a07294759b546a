import { timestampMs } from "@bufbuild/protobuf/wkt";
import { PrincipalKind } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import { AuditEventType } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { RebindSessionOutcome } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { DevicePlatform, DeviceStatus } from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import {
  auditTypeToWire,
  platformToWire,
  REBIND_OUTCOME,
  toAuditEvent,
  toDevice,
  toDevicePrincipal,
  toPlacement,
} from "../src/convert";
import { platform } from "../src/rules/catalog";
import { at, CLIENT, DEVICE, deviceRow, NOW, placementRow, TENANT } from "./rows";

describe("rows on the wire", () => {
  it("judges a device online at the given time and hides an expired lease", () => {
    const row = deviceRow({ online: true, lease_expires_at: at(1000), connection_generation: 2n });
    const live = toDevice(row, NOW);
    expect(live).toMatchObject({ online: true, connectionGeneration: 2n, status: DeviceStatus.ACTIVE });
    expect(live.leaseExpiresAt && timestampMs(live.leaseExpiresAt as never)).toBe(at(1000).getTime());
    const expired = toDevice(row, at(1000));
    expect(expired.online).toBe(false);
    expect(expired.leaseExpiresAt).toBeUndefined();
    expect(toDevice(deviceRow({ status: "revoked", revoked_reason: "lost" }), NOW)).toMatchObject({
      status: DeviceStatus.REVOKED,
      revokedReason: "lost",
      online: false,
    });
  });

  it("maps every platform both ways", () => {
    for (const value of [
      DevicePlatform.LINUX,
      DevicePlatform.MACOS,
      DevicePlatform.WINDOWS,
      DevicePlatform.ANDROID,
      DevicePlatform.IOS,
    ]) {
      expect(platformToWire(platform(value))).toBe(value);
    }
    expect(platformToWire("beos")).toBe(DevicePlatform.UNSPECIFIED);
  });

  it("authenticates a device credential as the device itself", () => {
    expect(toDevicePrincipal(deviceRow())).toEqual({
      kind: PrincipalKind.DEVICE,
      tenantId: TENANT,
      subjectId: DEVICE,
      credentialId: DEVICE,
      displayName: "laptop",
    });
  });

  it("shapes placements and audit rows", () => {
    expect(toPlacement(placementRow({ active_run_id: "run-1" }))).toMatchObject({
      rootSessionId: "root-1",
      deviceId: DEVICE,
      owner: { tenantId: TENANT, subjectId: CLIENT },
      rev: 3n,
      activeRunId: "run-1",
    });
    expect(toPlacement(placementRow()).activeRunId).toBe("");
    const event = toAuditEvent({
      id: "e",
      seq: 1n,
      tenant_id: TENANT,
      owner_subject_id: CLIENT,
      event_type: "session_rebound",
      device_id: null,
      actor_id: CLIENT,
      root_session_id: "root-1",
      enroll_token_id: null,
      detail: { from: "a", to: "b" },
      at: NOW,
    });
    expect(event).toMatchObject({ eventType: AuditEventType.SESSION_REBOUND, deviceId: "", enrollTokenId: "" });
    expect(JSON.parse(event.detailJson ?? "")).toEqual({ from: "a", to: "b" });
    expect(auditTypeToWire("unknown")).toBe(AuditEventType.UNSPECIFIED);
  });

  it("maps every rebind outcome to its own wire value", () => {
    const values = Object.values(REBIND_OUTCOME);
    expect(new Set(values).size).toBe(values.length);
    expect(values).not.toContain(RebindSessionOutcome.UNSPECIFIED);
  });
});
