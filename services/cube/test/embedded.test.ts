import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { createClient } from "@unimatrix/service-kit";
import { testConfig } from "@unimatrix/service-kit/testing";
import { startCube } from "../src/service";
import { as, OPERATOR_TOKEN } from "./harness";

describe("embedded default (PGlite + in-process bus)", () => {
  it("runs the same code paths: tenant, cube, seats, direct append, claim, read, liveness", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "cube-embedded-"));
    const service = await startCube({
      config: testConfig({ databaseUrl: undefined, redisUrl: undefined, dataDir, operatorToken: OPERATOR_TOKEN }),
      port: 0,
      cube: { livenessIntervalMs: 0 },
    });
    const address = `127.0.0.1:${service.port}`;
    const identity = createClient(IdentityService, address);
    const cube = createClient(CubeService, address);
    const activity = createClient(ActivityService, address);
    try {
      const t = await identity.createTenant({ name: "embedded", adminDisplayName: "admin" }, as(OPERATOR_TOKEN));
      const c = await identity.issueClient({ name: "agent" }, as(t.adminUserToken));
      const { cube: created } = await cube.createCube(
        { requestKey: crypto.randomUUID(), name: "e", directive: "" },
        as(c.token),
      );
      const cubeId = created?.id as string;
      await cube.createRole({ cubeId, name: "worker", isDefault: true, canBroadcast: true }, as(c.token));
      const a = await cube.attachSeat({ cubeId }, as(c.token));
      const b = await cube.attachSeat({ cubeId }, as(c.token));
      const entry = await activity.appendEntry(
        { cubeId, message: "for b", visibility: Visibility.DIRECT, recipientDroneIds: [b.drone?.id as string] },
        as(a.sessionToken),
      );
      const claim = await activity.claimEntry({ cubeId, entryId: entry.entry?.id as string }, as(b.sessionToken));
      expect(claim.claim?.holderDroneId).toBe(b.drone?.id);
      const read = await activity.readActivity({ cubeId }, as(a.sessionToken));
      expect(read.items.map((i) => i.item.case)).toEqual(["entry"]);
      const inbox = await activity.readUnread({ cubeId }, as(b.sessionToken));
      expect(inbox.items.map((i) => i.item.case)).toEqual(["entry"]);
      expect(await service.scanLiveness()).toEqual([]);
    } finally {
      identity.close();
      cube.close();
      activity.close();
      await service.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
