/** Connection lease rules: expiry, liveness, who holds the live generation, what an acquire displaces. */
import type { DeviceRow } from "../store/rows";

type LeaseState = Pick<DeviceRow, "lease_expires_at">;

/** When a lease taken or extended at `now` expires. */
export function leaseExpiry(now: Date, leaseSeconds: number): Date {
  return new Date(now.getTime() + leaseSeconds * 1000);
}

/** The suggested heartbeat interval: a third of the lease, at least one second. */
export function heartbeatIntervalSeconds(leaseSeconds: number): number {
  return Math.max(1, Math.floor(leaseSeconds / 3));
}

/** True while the lease has not reached its expiry (an expired lease is offline at once). */
export function leaseLive(row: LeaseState, now: Date): boolean {
  return row.lease_expires_at !== null && row.lease_expires_at.getTime() > now.getTime();
}

/** Whether a device is online at `now`: active with a live lease (what the wire's `online` says). */
export function onlineAt(row: Pick<DeviceRow, "status" | "lease_expires_at">, now: Date): boolean {
  return row.status === "active" && leaseLive(row, now);
}

/** True when `generation` is the live lease of an active device (release/heartbeat may act). */
export function holdsLease(
  row: Pick<DeviceRow, "status" | "connection_generation" | "lease_expires_at"> | undefined,
  generation: bigint,
  now: Date,
): boolean {
  return row?.status === "active" && row.connection_generation === generation && leaseLive(row, now);
}

/**
 * What taking a lease records besides CONNECTION_ACQUIRED: a live lease is FENCED; an expired one the
 * sweeper has not turned offline yet is EXPIRED first (with an offline note, so watchers see offline
 * before online); `wentOnline` says whether the device_online note is due.
 */
export function acquireEffects(
  row: Pick<DeviceRow, "online" | "lease_expires_at">,
  now: Date,
): { readonly fenced: boolean; readonly expired: boolean; readonly wentOnline: boolean } {
  const live = leaseLive(row, now);
  return { fenced: live, expired: !live && row.online, wentOnline: !row.online || !live };
}
