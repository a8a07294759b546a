import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { NoticeService, type WatchNoticesResponse } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import { DeliveryChannel, Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { asBearer, asPrincipal, eventually, TEST_INTERNAL_KEY, testConfig } from "@unimatrix/service-kit/testing";
import { startCube } from "../src/service";
import { OPERATOR_TOKEN } from "./harness";

describe("notices on the embedded default (PGlite + in-process bus)", () => {
  it("queues, streams and confirms a DIRECT entry's notice the same way", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "cube-notices-embedded-"));
    const service = await startCube({
      config: testConfig({ databaseUrl: undefined, redisUrl: undefined, dataDir, operatorToken: OPERATOR_TOKEN }),
      port: 0,
      cube: { livenessIntervalMs: 0 },
    });
    const address = `127.0.0.1:${service.port}`;
    const identity = createClient(IdentityService, address);
    const cube = createClient(CubeService, address);
    const activity = createClient(ActivityService, address);
    const notices = createClient(NoticeService, address);
    const controller = new AbortController();
    try {
      const t = await identity.createTenant({ name: "embedded", adminDisplayName: "admin" }, asBearer(OPERATOR_TOKEN));
      const c = await identity.issueClient({ name: "agent" }, asBearer(t.adminUserToken));
      const { cube: created } = await cube.createCube(
        { requestKey: crypto.randomUUID(), name: "e", directive: "" },
        asBearer(c.token),
      );
      const cubeId = created?.id as string;
      await cube.createRole({ cubeId, name: "worker", isDefault: true, canBroadcast: true }, asBearer(c.token));
      const machineId = crypto.randomUUID();
      const a = await cube.attachSeat({ cubeId }, asBearer(c.token));
      const b = await cube.attachSeat({ cubeId, machineId }, asBearer(c.token));
      const { entry } = await activity.appendEntry(
        { cubeId, message: "for b", visibility: Visibility.DIRECT, recipientDroneIds: [b.drone?.id as string] },
        asBearer(a.sessionToken),
      );
      const machine = asPrincipal(
        { kind: "machine", tenantId: t.tenant?.id as string, subjectId: machineId },
        TEST_INTERNAL_KEY,
      );
      const events: WatchNoticesResponse[] = [];
      const stream = notices.watchNotices({}, { ...machine, signal: controller.signal });
      void (async () => {
        try {
          for await (const event of stream) events.push(event);
        } catch {
          // cancelled at the end
        }
      })();
      await eventually(() => events.some((e) => e.event.case === "notice"), "the notice");
      const notice = events.find((e) => e.event.case === "notice")?.event.value as { id: string; entryId: string };
      expect(notice.entryId).toBe(entry?.id);
      expect((await notices.confirmNotice({ noticeId: notice.id }, machine)).newlyConfirmed).toBe(true);
      expect((await notices.confirmNotice({ noticeId: notice.id }, machine)).newlyConfirmed).toBe(false);
      const { receipts } = await activity.listReceipts(
        { cubeId, entryId: entry?.id as string },
        asBearer(a.sessionToken),
      );
      expect(receipts.map((r) => r.deliveredVia)).toEqual([DeliveryChannel.MACHINE_LINK]);
    } finally {
      controller.abort();
      identity.close();
      cube.close();
      activity.close();
      notices.close();
      await service.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
