import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PrincipalKind } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import type { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import {
  InvalidArgumentError,
  NotFoundError,
  parseToken,
  type ServiceImpl,
  UnauthenticatedError,
} from "@unimatrix/service-kit";
import { actorOf, type Scope, scopeOf } from "../access";
import { authenticateDevice, enrollDevice, getDevice, listDevices, revokeDevice } from "../store/devices";
import { acquireLease, heartbeatLease, releaseLease } from "../store/leases";
import { toDevice } from "./convert";
import type { HandlerDeps } from "./deps";
import { decodePageToken, encodePageToken, tokenDate } from "./paging";
import { pageSize, platform, publicKey, statusFilter, text, uuid } from "./validate";

/** The device a lease call names, when the caller may hold its lease (itself, or the operator). */
function leaseDevice(scope: Scope, deviceId: string): string {
  const id = uuid("device_id", deviceId);
  if (scope.kind === "device" && scope.deviceId !== id) throw new NotFoundError(`device ${id} not found`);
  return id;
}

/** DeviceService: enrollment by token, device records, the device credential, the connection lease. */
export function deviceHandlers(deps: HandlerDeps): ServiceImpl<typeof DeviceService> {
  const { db, clock, publisher, leaseSeconds } = deps;
  const heartbeatIntervalSeconds = Math.max(1, Math.floor(leaseSeconds / 3));
  return {
    async enrollDevice(request) {
      if (request.enrollToken === "") throw new InvalidArgumentError("enroll_token", "is required");
      const key = publicKey(request.publicKey);
      const os = platform(request.platform);
      const displayName = text("display_name", request.displayName, 200);
      const token = parseToken(request.enrollToken);
      if (token?.kind !== "enroll") throw new UnauthenticatedError("enroll_token is malformed");
      const now = clock.now();
      const enrolled = await enrollDevice(db, { token, publicKey: key, platform: os, displayName, now });
      await publisher.publish(enrolled.notes);
      return { device: toDevice(enrolled.device, now), deviceToken: enrolled.deviceToken, replayed: enrolled.replayed };
    },

    async getDevice(request, ctx) {
      const scope = scopeOf(await ctx.principal(), ["all", "tenant", "owner", "device"]);
      const row = await getDevice(db, scope, uuid("device_id", request.deviceId));
      return { device: toDevice(row, clock.now()) };
    },

    async listDevices(request, ctx) {
      const scope = scopeOf(await ctx.principal(), ["all", "tenant", "owner", "device"]);
      const limit = pageSize(request.pageSize);
      const status = statusFilter(request.status);
      const filters = { m: "devices", status };
      const key = decodePageToken(request.pageToken, filters, 2);
      const after = key ? { enrolledAt: tokenDate(key[0] as string), id: uuid("page_token", key[1] as string) } : null;
      const rows = await listDevices(db, scope, status, after, limit + 1);
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      const now = clock.now();
      return {
        devices: page.map((row) => toDevice(row, now)),
        nextPageToken:
          rows.length > limit && last ? encodePageToken([String(last.enrolled_at.getTime()), last.id], filters) : "",
      };
    },

    async revokeDevice(request, ctx) {
      const scope = scopeOf(await ctx.principal(), ["all", "tenant", "owner", "device"]);
      const id = uuid("device_id", request.deviceId);
      const reason = text("reason", request.reason, 500, 1);
      const now = clock.now();
      const revoked = await revokeDevice(db, scope, id, reason, actorOf(scope), now);
      await publisher.publish(revoked.notes);
      return { device: toDevice(revoked.device, now) };
    },

    async authenticate(request) {
      if (request.token === "") throw new InvalidArgumentError("token", "is required");
      const token = parseToken(request.token);
      if (token?.kind !== "device") throw new UnauthenticatedError("token is not a device credential");
      const device = await authenticateDevice(db, token);
      if (!device) throw new UnauthenticatedError("invalid credential");
      return {
        principal: {
          kind: PrincipalKind.DEVICE,
          tenantId: device.tenant_id,
          subjectId: device.id,
          credentialId: device.id,
          displayName: device.display_name,
        },
      };
    },

    async acquireConnection(request, ctx) {
      const scope = scopeOf(await ctx.principal(), ["device", "all"]);
      const id = leaseDevice(scope, request.deviceId);
      const acquired = await acquireLease(db, scope, id, leaseSeconds, actorOf(scope), clock.now());
      await publisher.publish(acquired.notes);
      return {
        generation: acquired.generation,
        leaseExpiresAt: timestampFromDate(acquired.leaseExpiresAt),
        heartbeatIntervalSeconds,
      };
    },

    async heartbeatConnection(request, ctx) {
      const scope = scopeOf(await ctx.principal(), ["device", "all"]);
      const id = leaseDevice(scope, request.deviceId);
      const expires = await heartbeatLease(db, id, request.generation, leaseSeconds, clock.now());
      return expires ? { ok: true, leaseExpiresAt: timestampFromDate(expires) } : { ok: false };
    },

    async releaseConnection(request, ctx) {
      const scope = scopeOf(await ctx.principal(), ["device", "all"]);
      const id = leaseDevice(scope, request.deviceId);
      const released = await releaseLease(db, id, request.generation, actorOf(scope), clock.now());
      await publisher.publish(released.notes);
      return { ok: released.ok };
    },
  };
}
