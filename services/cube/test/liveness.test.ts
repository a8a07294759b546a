import { NotificationKind } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { asBearer } from "@unimatrix/service-kit/testing";
import { CubeAccess, grant, type Harness, newClient, newCube, newTenant, post, seat, startHarness } from "./harness";

const MIN = 60_000;

describe("liveness scan rules", () => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 8));
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("cube_liveness", { clock });
  });
  afterAll(async () => {
    await h.close();
  });

  it("pings silent participants after 10 min, at most 3 times, 10 min apart; posting or attaching resets", async () => {
    const t = await newTenant(h, "live");
    const owner = await newClient(h, t.userToken, "owner");
    const reader = await newClient(h, t.userToken, "reader");
    const { cubeId, roleId } = await newCube(h, owner.token);
    await grant(h, t.userToken, reader.id, cubeId, CubeAccess.READ);
    const a = await seat(h, owner.token, cubeId);
    await seat(h, reader.token, cubeId); // an observer: never pinged
    const gone = await seat(h, owner.token, cubeId);
    await h.cube.evictDrone({ cubeId, droneId: gone.droneId }, asBearer(owner.token));
    clock.advance(10 * MIN - 1);
    expect(await h.service.scanLiveness()).toEqual([]);
    clock.advance(1);
    expect(await h.service.scanLiveness()).toEqual([a.droneId]);
    expect(await h.service.scanLiveness()).toEqual([]);
    clock.advance(10 * MIN - 1);
    expect(await h.service.scanLiveness()).toEqual([]);
    clock.advance(1);
    expect(await h.service.scanLiveness()).toEqual([a.droneId]);
    clock.advance(10 * MIN);
    expect(await h.service.scanLiveness()).toEqual([a.droneId]);
    clock.advance(10 * MIN);
    expect(await h.service.scanLiveness()).toEqual([]);
    const drones = await h.cube.listDrones({ cubeId }, asBearer(owner.token));
    expect(drones.drones.find((d) => d.id === a.droneId)?.silentPingCount).toBe(3);
    const pings = await h.activity.readActivity({ cubeId }, asBearer(a.token));
    const kinds = pings.items.flatMap((i) => (i.item.case === "notification" ? [i.item.value.kind] : []));
    expect(kinds).toEqual([
      NotificationKind.HEARTBEAT_PING,
      NotificationKind.HEARTBEAT_PING,
      NotificationKind.HEARTBEAT_PING,
    ]);
    // Posting resets the state.
    await post(h, a.token, cubeId, "I am here");
    const after = await h.cube.listDrones({ cubeId }, asBearer(owner.token));
    expect(after.drones.find((d) => d.id === a.droneId)?.silentPingCount).toBe(0);
    clock.advance(10 * MIN);
    expect(await h.service.scanLiveness()).toEqual([a.droneId]);
    // Attaching (reuse) resets it too.
    await h.cube.attachSeat({ cubeId, roleId, sessionToken: a.token }, asBearer(owner.token));
    clock.advance(10 * MIN - 1);
    expect(await h.service.scanLiveness()).toEqual([]);
  });
});

describe("liveness scan limits and replicas", () => {
  const clock = new ManualClock(Date.UTC(2026, 6, 1, 8));
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("cube_liveness_n", { clock });
  });
  afterAll(async () => {
    await h.close();
  });

  it("pings at most 25 per scan, oldest first", async () => {
    const t = await newTenant(h, "many");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId } = await newCube(h, owner.token);
    const seats: string[] = [];
    for (let i = 0; i < 30; i++) {
      seats.push((await seat(h, owner.token, cubeId)).droneId);
      clock.advance(1_000);
    }
    clock.advance(10 * MIN);
    const first = await h.service.scanLiveness();
    expect(first).toEqual(seats.slice(0, 25));
    expect(await h.service.scanLiveness()).toEqual(seats.slice(25));
    // Move everyone out of the window for the next test.
    clock.advance(60 * MIN);
    for (let i = 0; i < 3; i++) {
      await h.service.scanLiveness();
      await h.service.scanLiveness();
      clock.advance(10 * MIN);
    }
    expect(await h.service.scanLiveness()).toEqual([]);
  });

  it("two replicas scanning together ping each silent drone once per round", async () => {
    const b = await h.replica();
    const t = await newTenant(h, "replicas");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId } = await newCube(h, owner.token);
    const ids = new Set<string>();
    for (let i = 0; i < 40; i++) ids.add((await seat(h, owner.token, cubeId)).droneId);
    for (let round = 1; round <= 3; round++) {
      clock.advance(10 * MIN);
      const runs = await Promise.all([
        h.service.scanLiveness(),
        b.service.scanLiveness(),
        h.service.scanLiveness(),
        b.service.scanLiveness(),
      ]);
      const pinged = runs.flat();
      expect(pinged.length).toBe(40);
      expect(new Set(pinged)).toEqual(ids);
      const rows = await h.sql<{ n: string }>(
        "SELECT count(*)::text AS n FROM activity_items WHERE cube_id = $1 AND notification_kind = 'heartbeat_ping'",
        [cubeId],
      );
      expect(Number(rows[0]?.n)).toBe(40 * round);
    }
  });
});
