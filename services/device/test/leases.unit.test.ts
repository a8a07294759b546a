import {
  acquireEffects,
  heartbeatIntervalSeconds,
  holdsLease,
  leaseExpiry,
  leaseLive,
  onlineAt,
} from "../src/rules/leases";
import { at, deviceRow, NOW } from "./rows";

describe("connection lease rules", () => {
  it("expires lease seconds after it is taken or extended; heartbeats every third of it", () => {
    expect(leaseExpiry(NOW, 30).getTime()).toBe(NOW.getTime() + 30_000);
    expect(heartbeatIntervalSeconds(30)).toBe(10);
    expect(heartbeatIntervalSeconds(10)).toBe(3);
    expect(heartbeatIntervalSeconds(3)).toBe(1);
    expect(heartbeatIntervalSeconds(1)).toBe(1);
  });

  it("is live strictly before its expiry; a device is online only while active with a live lease", () => {
    const leased = deviceRow({ online: true, lease_expires_at: at(1000), connection_generation: 4n });
    expect(leaseLive(leased, at(999))).toBe(true);
    expect(leaseLive(leased, at(1000))).toBe(false);
    expect(leaseLive(deviceRow(), NOW)).toBe(false);
    expect(onlineAt(leased, NOW)).toBe(true);
    expect(onlineAt(leased, at(1000))).toBe(false);
    expect(onlineAt({ ...leased, status: "revoked" }, NOW)).toBe(false);
  });

  it("lets only the live generation of an active device heartbeat or release", () => {
    const leased = deviceRow({ online: true, lease_expires_at: at(1000), connection_generation: 4n });
    expect(holdsLease(leased, 4n, NOW)).toBe(true);
    expect(holdsLease(leased, 3n, NOW)).toBe(false);
    expect(holdsLease(leased, 4n, at(1000))).toBe(false);
    expect(holdsLease({ ...leased, status: "revoked" }, 4n, NOW)).toBe(false);
    expect(holdsLease(undefined, 4n, NOW)).toBe(false);
  });

  it("fences a live lease, expires an unswept one first, and goes online only from offline", () => {
    expect(acquireEffects(deviceRow(), NOW)).toEqual({ fenced: false, expired: false, wentOnline: true });
    const live = deviceRow({ online: true, lease_expires_at: at(5000) });
    expect(acquireEffects(live, NOW)).toEqual({ fenced: true, expired: false, wentOnline: false });
    const unswept = deviceRow({ online: true, lease_expires_at: at(-1) });
    expect(acquireEffects(unswept, NOW)).toEqual({ fenced: false, expired: true, wentOnline: true });
  });
});
