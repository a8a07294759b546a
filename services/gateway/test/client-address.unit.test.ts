import { isGrpcTarget, isRetrySafe } from "@unimatrix/service-kit/grpc";
import { clientAddress, parseCidrs } from "../src/client-address";

const request = (remoteAddress: string, forwardedFor?: string) => ({
  socket: { remoteAddress },
  headers: forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor },
});

describe("client address (GATEWAY_TRUSTED_PROXIES)", () => {
  const trusted = parseCidrs("10.0.0.0/8, fd00::/8, 192.0.2.7");

  it("parses CIDR lists and refuses what is not one", () => {
    expect(parseCidrs("").cidrs).toEqual([]);
    expect(trusted.has("10.1.2.3")).toBe(true);
    expect(trusted.has("::ffff:10.1.2.3")).toBe(true);
    expect(trusted.has("fd00::1")).toBe(true);
    expect(trusted.has("192.0.2.7")).toBe(true);
    expect(trusted.has("192.0.2.8")).toBe(false);
    expect(trusted.has("not an address")).toBe(false);
    for (const bad of ["10.0.0.0/33", "10.0.0.0/8/1", "example.com", "10.0.0.0/x", "fd00::/129"]) {
      expect(() => parseCidrs(bad)).toThrow(/CIDRs such as 10.0.0.0\/8/);
    }
  });

  it("takes the socket address unless the socket is a trusted proxy", () => {
    expect(clientAddress(request("203.0.113.1", "198.51.100.1"), parseCidrs(""))).toBe("203.0.113.1");
    expect(clientAddress(request("203.0.113.1", "198.51.100.1"), trusted)).toBe("203.0.113.1");
    expect(clientAddress(request("::ffff:10.0.0.5", "198.51.100.1"), trusted)).toBe("198.51.100.1");
  });

  it("reads X-Forwarded-For from the right, skipping trusted hops; a spoofed left part is never believed", () => {
    expect(clientAddress(request("10.0.0.5", "6.6.6.6, 198.51.100.1, 10.0.0.9"), trusted)).toBe("198.51.100.1");
    expect(clientAddress(request("10.0.0.5", "10.0.0.8, 10.0.0.9"), trusted)).toBe("10.0.0.8");
    expect(clientAddress(request("10.0.0.5", "garbage, 198.51.100.1"), trusted)).toBe("198.51.100.1");
    expect(clientAddress(request("10.0.0.5", "198.51.100.1, garbage"), trusted)).toBe("10.0.0.5");
    expect(clientAddress(request("10.0.0.5"), trusted)).toBe("10.0.0.5");
  });
});

describe("dialing rules (kit)", () => {
  it("knows gRPC targets", () => {
    expect(isGrpcTarget("dns:///cube-headless:7001")).toBe(true);
    expect(isGrpcTarget("ipv4:10.0.0.1:7001,10.0.0.2:7001")).toBe(true);
    expect(isGrpcTarget("[::1]:7001")).toBe(true);
    expect(isGrpcTarget("cube:7001")).toBe(true);
    expect(isGrpcTarget("cube")).toBe(false);
    expect(isGrpcTarget("")).toBe(false);
    expect(isGrpcTarget("ipv4:10.0.0.1:7001,,10.0.0.2:7001")).toBe(false);
  });

  it("retries reads and token lookups only", () => {
    for (const method of [
      "ListCubes",
      "GetCube",
      "ReadUnread",
      "Authenticate",
      "Check",
      "SubscribeActivity",
      "WatchMachines",
      "DronesSince",
    ]) {
      expect([method, isRetrySafe(method)]).toEqual([method, true]);
    }
    for (const method of [
      "AppendEntry",
      "CreateCube",
      "AttachSeat",
      "ClaimEntry",
      "Link",
      "EvictDrone",
      "HeartbeatConnection",
    ]) {
      expect([method, isRetrySafe(method)]).toEqual([method, false]);
    }
  });
});
