import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import {
  ActivityService,
  type SubscribeActivityResponse,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { asBearer, collect, expectStatus, testConfig } from "@unimatrix/service-kit/testing";
import { startCube } from "../src/service";
import { OPERATOR_TOKEN } from "./harness";

describe("embedded default (PGlite + in-process bus)", () => {
  it("runs the same code paths: tenant, cube, seats, direct append, claim, read, live streams, liveness, taken names", async () => {
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
      const t = await identity.createTenant({ name: "embedded", adminDisplayName: "admin" }, asBearer(OPERATOR_TOKEN));
      const c = await identity.issueClient({ name: "agent" }, asBearer(t.adminUserToken));
      const { cube: created } = await cube.createCube(
        { requestKey: crypto.randomUUID(), name: "e", directive: "" },
        asBearer(c.token),
      );
      const cubeId = created?.id as string;
      await cube.createRole({ cubeId, name: "worker", isDefault: true, canBroadcast: true }, asBearer(c.token));
      const a = await cube.attachSeat({ cubeId }, asBearer(c.token));
      const b = await cube.attachSeat({ cubeId }, asBearer(c.token));
      const entry = await activity.appendEntry(
        { cubeId, message: "for b", visibility: Visibility.DIRECT, recipientDroneIds: [b.drone?.id as string] },
        asBearer(a.sessionToken),
      );
      const claim = await activity.claimEntry({ cubeId, entryId: entry.entry?.id as string }, asBearer(b.sessionToken));
      expect(claim.claim?.holderDroneId).toBe(b.drone?.id);
      const read = await activity.readActivity({ cubeId }, asBearer(a.sessionToken));
      expect(read.items.map((i) => i.item.case)).toEqual(["entry"]);
      const inbox = await activity.readUnread({ cubeId }, asBearer(b.sessionToken));
      expect(inbox.items.map((i) => i.item.case)).toEqual(["entry"]);
      // Live streams (the feed) on PGlite too: a DIRECT entry reaches its recipient only, a
      // broadcast everyone, in order.
      const third = await cube.attachSeat({ cubeId }, asBearer(c.token));
      const live = (token: string) => {
        const stream = activity.subscribeActivity({ cubeId }, asBearer(token));
        const ready = new Promise<void>((resolve) =>
          stream.on("data", (event: SubscribeActivityResponse) => event.event.case === "ready" && resolve()),
        );
        const entries = collect<SubscribeActivityResponse>(
          stream,
          (event) => event.event.case === "entry" && event.event.value.message === "live broadcast",
        );
        return { ready, entries };
      };
      const forB = live(b.sessionToken);
      const forThird = live(third.sessionToken);
      await Promise.all([forB.ready, forThird.ready]);
      const recipients = [b.drone?.id as string];
      await activity.appendEntry(
        { cubeId, message: "live for b", visibility: Visibility.DIRECT, recipientDroneIds: recipients },
        asBearer(a.sessionToken),
      );
      await activity.appendEntry(
        { cubeId, message: "live broadcast", visibility: Visibility.BROADCAST },
        asBearer(a.sessionToken),
      );
      const messages = async (s: ReturnType<typeof live>) =>
        (await s.entries).flatMap((event) => (event.event.case === "entry" ? [event.event.value.message] : []));
      expect(await messages(forB)).toEqual(["live for b", "live broadcast"]);
      expect(await messages(forThird)).toEqual(["live broadcast"]);
      expect(await service.scanLiveness()).toEqual([]);
      // Unique violations are recognised on PGlite too: a taken name is ALREADY_EXISTS, not INTERNAL.
      await expectStatus(
        identity.createTenant({ name: "embedded", adminDisplayName: "again" }, asBearer(OPERATOR_TOKEN)),
        status.ALREADY_EXISTS,
      );
      await expectStatus(identity.issueClient({ name: "agent" }, asBearer(t.adminUserToken)), status.ALREADY_EXISTS);
      await expectStatus(cube.createRole({ cubeId, name: "worker" }, asBearer(c.token)), status.ALREADY_EXISTS);
    } finally {
      identity.close();
      cube.close();
      activity.close();
      await service.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
