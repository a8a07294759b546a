import { HealthCheckResponse_ServingStatus as ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { HealthRegistry, LIVENESS_SERVICE } from "@unimatrix/service-kit/grpc";

describe("HealthRegistry: a dependency down makes every service NOT_SERVING", () => {
  it("follows the database while up, wakes watchers on each change, and a shutdown stays NOT_SERVING", () => {
    const health = new HealthRegistry();
    health.set("", "SERVING");
    health.set("unimatrix.cube.v1.CubeService", "SERVING");
    let wakes = 0;
    health.watch(() => wakes++);
    health.dependency("database", "connect ECONNREFUSED");
    expect([health.get(""), health.get("unimatrix.cube.v1.CubeService")]).toEqual([
      ServingStatus.NOT_SERVING,
      ServingStatus.NOT_SERVING,
    ]);
    expect(health.get("unknown")).toBeUndefined();
    health.dependency("database", "connect ECONNREFUSED"); // the same: no wake
    expect(wakes).toBe(1);
    health.dependency("database", undefined);
    expect(health.get("")).toBe(ServingStatus.SERVING);
    expect(wakes).toBe(2);
    health.shutdown();
    health.dependency("database", "down");
    health.dependency("database", undefined);
    expect(health.get("")).toBe(ServingStatus.NOT_SERVING);
  });
});

describe("HealthRegistry: liveness", () => {
  it("stays SERVING while a dependency is down, and goes NOT_SERVING on shutdown", () => {
    const health = new HealthRegistry();
    health.set("", "SERVING");
    health.set(LIVENESS_SERVICE, "SERVING");
    health.dependency("database", "read-only");
    expect([health.get(""), health.get(LIVENESS_SERVICE)]).toEqual([ServingStatus.NOT_SERVING, ServingStatus.SERVING]);
    health.shutdown();
    expect(health.get(LIVENESS_SERVICE)).toBe(ServingStatus.NOT_SERVING);
  });
});
