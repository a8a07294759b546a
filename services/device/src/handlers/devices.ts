import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import { credentialKey, parseToken } from "@unimatrix/service-kit/auth";
import { UnauthenticatedError } from "@unimatrix/service-kit/errors";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import { pageSize, requireUuid } from "@unimatrix/service-kit/rules";
import { toDevice, toDevicePrincipal } from "../convert";
import type { DeviceDeps } from "../deps";
import { actorOf, CALLERS, leaseHolder, scopeOf } from "../rules/access";
import { platform, statusFilter } from "../rules/catalog";
import { heartbeatIntervalSeconds } from "../rules/leases";
import { deviceFilters, pageOf } from "../rules/paging";
import { trimmed } from "../rules/request";
import { authenticateDevice, enrollDevice, getDevice, listDevices, revokeDevice } from "../store/devices";
import { acquireLease, heartbeatLease, releaseLease } from "../store/leases";

/** DeviceService: enrollment by token, device records, the device credential, the connection lease. */
export function deviceHandlers(deps: DeviceDeps): ServiceImpl<typeof DeviceService> {
  const { db, clock, publisher, pages, leaseSeconds } = deps;
  const heartbeatEvery = heartbeatIntervalSeconds(leaseSeconds);
  return {
    async enrollDevice(request) {
      const key = request.publicKey;
      const os = platform(request.platform);
      const displayName = trimmed("display_name", request.displayName);
      const token = parseToken(request.enrollToken);
      if (token?.kind !== "enroll") throw new UnauthenticatedError("enroll_token is malformed");
      const now = clock.now();
      const enrolled = await enrollDevice(db, { token, publicKey: key, platform: os, displayName, now });
      await publisher.publish(enrolled.notes);
      return { device: toDevice(enrolled.device, now), deviceToken: enrolled.deviceToken, replayed: enrolled.replayed };
    },

    async getDevice(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.getDevice);
      const row = await getDevice(db, scope, requireUuid("device_id", request.deviceId));
      return { device: toDevice(row, clock.now()) };
    },

    async listDevices(request, ctx) {
      const principal = await ctx.principal();
      const scope = scopeOf(principal, CALLERS.listDevices);
      const limit = pageSize("page_size", request.pageSize);
      const status = statusFilter(request.status);
      const binding = { caller: credentialKey(principal), filter: deviceFilters(status) };
      const after = pages.devices.open(request.pageToken, binding);
      const rows = await listDevices(db, scope, status, after, limit + 1);
      const now = clock.now();
      const { page, nextPageToken } = pageOf(rows, limit, (last) =>
        pages.devices.seal({ at: last.enrolled_at, id: last.id }, binding),
      );
      return { devices: page.map((row) => toDevice(row, now)), nextPageToken };
    },

    async revokeDevice(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.revokeDevice);
      const id = requireUuid("device_id", request.deviceId);
      const reason = trimmed("reason", request.reason, true);
      const now = clock.now();
      const revoked = await revokeDevice(db, scope, id, reason, actorOf(scope), now);
      await publisher.publish(revoked.notes);
      return { device: toDevice(revoked.device, now) };
    },

    async authenticate(request) {
      const token = parseToken(request.token);
      if (token?.kind !== "device") throw new UnauthenticatedError("token is not a device credential");
      const device = await authenticateDevice(db, token);
      if (!device) throw new UnauthenticatedError("invalid credential");
      return { principal: toDevicePrincipal(device) };
    },

    async acquireConnection(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.acquireConnection);
      const id = leaseHolder(scope, requireUuid("device_id", request.deviceId));
      const acquired = await acquireLease(db, scope, id, leaseSeconds, actorOf(scope), clock.now());
      await publisher.publish(acquired.notes);
      return {
        generation: acquired.generation,
        leaseExpiresAt: timestampFromDate(acquired.leaseExpiresAt),
        heartbeatIntervalSeconds: heartbeatEvery,
      };
    },

    async heartbeatConnection(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.heartbeatConnection);
      const id = leaseHolder(scope, requireUuid("device_id", request.deviceId));
      const expires = await heartbeatLease(db, id, request.generation, leaseSeconds, clock.now());
      return expires ? { ok: true, leaseExpiresAt: timestampFromDate(expires) } : { ok: false };
    },

    async releaseConnection(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.releaseConnection);
      const id = leaseHolder(scope, requireUuid("device_id", request.deviceId));
      const released = await releaseLease(db, id, request.generation, actorOf(scope), clock.now());
      await publisher.publish(released.notes);
      return { ok: released.ok };
    },
  };
}
