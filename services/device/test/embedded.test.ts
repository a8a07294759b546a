import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import {
  PlacementService,
  PlaceSessionOutcome,
  RebindSessionOutcome,
} from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { DevicePlatform } from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { startDevice } from "@unimatrix/device";
import { InProcessBus } from "@unimatrix/service-kit/bus";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { createClient } from "@unimatrix/service-kit/grpc";
import { testConfig } from "@unimatrix/service-kit/testing";
import { as, newPublicKey, tenant } from "./harness";

describe("embedded default (PGlite, in-process bus)", () => {
  it("runs the same migrations and write paths: enroll, lease, place, rebind, expire", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "umx-device-"));
    const bus = new InProcessBus();
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const service = await startDevice({
      config: testConfig({ databaseUrl: undefined, redisUrl: undefined, dataDir }),
      port: 0,
      bus,
      clock,
      leaseSeconds: 10,
      sweepMs: 0,
    });
    const address = `127.0.0.1:${service.port}`;
    const enrollment = createClient(EnrollmentService, address);
    const devices = createClient(DeviceService, address);
    const placement = createClient(PlacementService, address);
    try {
      expect(service.database.kind).toBe("pglite");
      const t = tenant();
      const ids: string[] = [];
      for (let i = 0; i < 2; i += 1) {
        const issued = await enrollment.issueEnrollToken({ ttlSeconds: 60 }, as(t.user));
        const enrolled = await devices.enrollDevice({
          enrollToken: issued.token,
          publicKey: newPublicKey(),
          platform: DevicePlatform.IOS,
        });
        ids.push(enrolled.device?.id ?? "");
      }
      const [a, b] = ids as [string, string];
      const lease = await devices.acquireConnection(
        { deviceId: a },
        as({ kind: "device", tenantId: t.tenantId, subjectId: a }),
      );
      expect(lease.generation).toBe(1n);
      const placed = await placement.placeSession({ rootSessionId: "root-e", deviceId: a }, as(t.user));
      expect(placed.outcome).toBe(PlaceSessionOutcome.BOUND);
      const moved = await placement.rebindSession(
        { rootSessionId: "root-e", deviceId: b, expectedRev: 1n },
        as(t.user),
      );
      expect(moved.outcome).toBe(RebindSessionOutcome.REBOUND);
      clock.advance(10_000);
      expect(await service.sweepLeases()).toBe(1);
      expect((await devices.getDevice({ deviceId: a }, as(t.user))).device?.online).toBe(false);
    } finally {
      enrollment.close();
      devices.close();
      placement.close();
      await service.stop();
      await bus.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
