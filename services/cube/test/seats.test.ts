import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { status } from "@grpc/grpc-js";
import { AttachSeatOutcome } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { DronePosture } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import { CubeAccess, grant, type Harness, newClient, newCube, newTenant, post, seat, startHarness } from "./harness";

const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
let h: Harness;
let user: string;
let owner: { id: string; token: string };
beforeAll(async () => {
  h = await startHarness("cube_seats", { clock, cube: { sessionTtlMs: 3_600_000 } });
  const t = await newTenant(h, "seats");
  user = t.userToken;
  owner = await newClient(h, user, "owner");
});
afterAll(async () => {
  await h.close();
});

describe("attach", () => {
  it("creates a drone labelled from the role, then reuses a saved valid session", async () => {
    const { cubeId, roleId } = await newCube(h, owner.token);
    const first = await h.cube.attachSeat({ cubeId, roleId, hostname: "box-1" }, asBearer(owner.token));
    expect(first.outcome).toBe(AttachSeatOutcome.CREATED);
    expect(first.drone?.label).toBe("worker-1");
    expect(first.sessionToken).toMatch(/^umx_drone_/);
    const second = await h.cube.attachSeat({ cubeId, hostname: "box-2" }, asBearer(owner.token));
    expect(second.drone?.label).toBe("worker-2");
    clock.advance(60_000);
    const reused = await h.cube.attachSeat(
      { cubeId, roleId, sessionToken: first.sessionToken, priorDroneId: first.drone?.id },
      asBearer(owner.token),
    );
    expect(reused.outcome).toBe(AttachSeatOutcome.REUSED);
    expect(reused.sessionToken).toBe("");
    expect(reused.sessionId).toBe(first.sessionId);
    expect(reused.drone?.id).toBe(first.drone?.id);
    expect(reused.drone?.lastSeenAt?.seconds).toBe(
      first.drone?.lastSeenAt?.seconds ? first.drone.lastSeenAt.seconds + 60n : 0n,
    );
  });

  it("rejects a saved session for another role, cube, client, prior drone or after revocation, changing nothing", async () => {
    const { cubeId, roleId } = await newCube(h, owner.token);
    const { role: other } = await h.cube.createRole({ cubeId, name: "other" }, asBearer(owner.token));
    const { cubeId: cube2 } = await newCube(h, owner.token, "second");
    const a = await h.cube.attachSeat({ cubeId, roleId }, asBearer(owner.token));
    const b = await h.cube.attachSeat({ cubeId, roleId }, asBearer(owner.token));
    const stranger = await newClient(h, user, "stranger");
    await grant(h, user, stranger.id, cubeId, CubeAccess.WRITE);
    const before = await h.sql("SELECT id, last_seen_at FROM drones ORDER BY id");
    const attempts = [
      h.cube.attachSeat({ cubeId, roleId: other?.id as string, sessionToken: a.sessionToken }, asBearer(owner.token)),
      h.cube.attachSeat({ cubeId: cube2, sessionToken: a.sessionToken }, asBearer(owner.token)),
      h.cube.attachSeat({ cubeId, roleId, sessionToken: a.sessionToken }, asBearer(stranger.token)),
      h.cube.attachSeat(
        { cubeId, roleId, sessionToken: a.sessionToken, priorDroneId: b.drone?.id },
        asBearer(owner.token),
      ),
      h.cube.attachSeat({ cubeId, roleId, sessionToken: "umx_drone_garbage_garbage" }, asBearer(owner.token)),
    ];
    for (const attempt of attempts) {
      const res = await attempt;
      expect(res.outcome).toBe(AttachSeatOutcome.SESSION_REJECTED);
      expect(res.drone).toBeUndefined();
      expect(res.sessionToken).toBe("");
    }
    expect(await h.sql("SELECT id, last_seen_at FROM drones ORDER BY id")).toEqual(before);
    await h.cube.evictDrone({ cubeId, droneId: a.drone?.id as string }, asBearer(owner.token));
    const afterEvict = await h.cube.attachSeat({ cubeId, roleId, sessionToken: a.sessionToken }, asBearer(owner.token));
    expect(afterEvict.outcome).toBe(AttachSeatOutcome.SESSION_REJECTED);
    clock.advance(3_600_001);
    const expired = await h.cube.attachSeat({ cubeId, roleId, sessionToken: b.sessionToken }, asBearer(owner.token));
    expect(expired.outcome).toBe(AttachSeatOutcome.SESSION_REJECTED);
  });

  it("reattaches a prior drone with no live session, keeping its label; refuses occupied or evicted ones", async () => {
    const { cubeId, roleId } = await newCube(h, owner.token);
    const a = await h.cube.attachSeat({ cubeId, roleId }, asBearer(owner.token));
    const droneId = a.drone?.id as string;
    await expectStatus(
      h.cube.attachSeat({ cubeId, roleId, priorDroneId: droneId }, asBearer(owner.token)),
      status.FAILED_PRECONDITION,
    );
    clock.advance(3_600_001); // the session expires
    const again = await h.cube.attachSeat({ cubeId, roleId, priorDroneId: droneId }, asBearer(owner.token));
    expect(again.outcome).toBe(AttachSeatOutcome.CREATED);
    expect(again.drone?.id).toBe(droneId);
    expect(again.drone?.label).toBe(a.drone?.label);
    expect(again.sessionId).not.toBe(a.sessionId);
    const other = await newClient(h, user, "other-client");
    await grant(h, user, other.id, cubeId, CubeAccess.WRITE);
    await expectStatus(
      h.cube.attachSeat({ cubeId, roleId, priorDroneId: droneId }, asBearer(other.token)),
      status.NOT_FOUND,
    );
    await h.cube.evictDrone({ cubeId, droneId }, asBearer(owner.token));
    await expectStatus(
      h.cube.attachSeat({ cubeId, roleId, priorDroneId: droneId }, asBearer(owner.token)),
      status.FAILED_PRECONDITION,
    );
  });

  it("requires a client, a role or a default role, and valid ids", async () => {
    const { cube } = await h.cube.createCube(
      { requestKey: crypto.randomUUID(), name: "nodefault", directive: "" },
      asBearer(owner.token),
    );
    const cubeId = cube?.id as string;
    await expectStatus(h.cube.attachSeat({ cubeId }, asBearer(owner.token)), status.FAILED_PRECONDITION);
    await expectStatus(
      h.cube.attachSeat({ cubeId, roleId: crypto.randomUUID() }, asBearer(owner.token)),
      status.NOT_FOUND,
    );
    await expectStatus(
      h.cube.attachSeat({ cubeId, roleId: "bad" }, asBearer(owner.token)),
      status.INVALID_ARGUMENT,
      "role_id",
    );
    await expectStatus(
      h.cube.attachSeat({ cubeId, priorDroneId: "bad" }, asBearer(owner.token)),
      status.INVALID_ARGUMENT,
      "prior_drone_id",
    );
    await expectStatus(h.cube.attachSeat({ cubeId }, asBearer(user)), status.PERMISSION_DENIED);
  });
});

describe("posture and listing", () => {
  it("participants hold write/manage with an active client; others are observers", async () => {
    const { cubeId } = await newCube(h, owner.token);
    const reader = await newClient(h, user, "reader-p");
    const writer = await newClient(h, user, "writer-p");
    await grant(h, user, reader.id, cubeId, CubeAccess.READ);
    await grant(h, user, writer.id, cubeId, CubeAccess.WRITE);
    const r = await seat(h, reader.token, cubeId);
    const w = await seat(h, writer.token, cubeId);
    const o = await seat(h, owner.token, cubeId);
    const posture = async () => {
      const list = await h.cube.listDrones({ cubeId }, asBearer(user));
      return Object.fromEntries(list.drones.map((d) => [d.id, d.posture]));
    };
    expect(await posture()).toEqual({
      [r.droneId]: DronePosture.OBSERVER,
      [w.droneId]: DronePosture.PARTICIPANT,
      [o.droneId]: DronePosture.PARTICIPANT,
    });
    await grant(h, user, writer.id, cubeId, CubeAccess.READ);
    expect((await posture())[w.droneId]).toBe(DronePosture.OBSERVER);
    await expectStatus(post(h, w.token, cubeId, "observers cannot post"), status.PERMISSION_DENIED);
  });

  it("evict revokes sessions, is idempotent, needs manage or the own client", async () => {
    const { cubeId } = await newCube(h, owner.token);
    const writer = await newClient(h, user, "writer-e");
    await grant(h, user, writer.id, cubeId, CubeAccess.WRITE);
    const mine = await seat(h, writer.token, cubeId);
    const theirs = await seat(h, owner.token, cubeId);
    await expectStatus(
      h.cube.evictDrone({ cubeId, droneId: theirs.droneId }, asBearer(writer.token)),
      status.PERMISSION_DENIED,
    );
    const own = await h.cube.evictDrone({ cubeId, droneId: mine.droneId }, asBearer(writer.token));
    expect(own.revokedSessionCount).toBe(1);
    expect(own.drone?.evictedAt).toBeDefined();
    const again = await h.cube.evictDrone({ cubeId, droneId: mine.droneId }, asBearer(owner.token));
    expect(again.revokedSessionCount).toBe(0);
    await expectStatus(post(h, mine.token, cubeId, "gone"), status.UNAUTHENTICATED);
    const live = await h.cube.listDrones({ cubeId }, asBearer(user));
    expect(live.drones.map((d) => d.id)).toEqual([theirs.droneId]);
    const all = await h.cube.listDrones({ cubeId, includeEvicted: true }, asBearer(user));
    // Both seats were created at the same (manual) instant: order then falls to the id.
    expect(all.drones.map((d) => d.id)).toEqual([mine.droneId, theirs.droneId].sort());
    await expectStatus(
      post(h, theirs.token, cubeId, "to the evicted", [mine.droneId]),
      status.INVALID_ARGUMENT,
      "recipient_drone_ids",
    );
  });
});

describe("drones since", () => {
  it("marks drones that posted after a time or an entry, ties on the instant broken by entry id", async () => {
    const { cubeId } = await newCube(h, owner.token);
    const a = await seat(h, owner.token, cubeId);
    const b = await seat(h, owner.token, cubeId);
    const c = await seat(h, owner.token, cubeId);
    clock.advance(1_000);
    const t0 = clock.now();
    // Same instant: a and b post together.
    const ea = await post(h, a.token, cubeId, "a");
    const eb = await post(h, b.token, cubeId, "b");
    clock.advance(1_000);
    const seenFrom = async (anchor: { sinceEntryId: string } | { sinceTime: Date }) => {
      const res = await h.cube.dronesSince(
        {
          cubeId,
          anchor:
            "sinceEntryId" in anchor
              ? { case: "sinceEntryId", value: anchor.sinceEntryId }
              : { case: "sinceTime", value: timestampFromDate(anchor.sinceTime) },
        },
        asBearer(user),
      );
      return Object.fromEntries(res.drones.map((d) => [d.id, d.seenSince]));
    };
    const [low, high] = ea.id < eb.id ? [ea, eb] : [eb, ea];
    const highAuthor = high.author?.droneId as string;
    const lowAuthor = low.author?.droneId as string;
    expect(await seenFrom({ sinceEntryId: low.id })).toEqual({
      [a.droneId]: highAuthor === a.droneId,
      [b.droneId]: highAuthor === b.droneId,
      [c.droneId]: false,
    });
    expect((await seenFrom({ sinceEntryId: high.id }))[lowAuthor]).toBe(false);
    expect(await seenFrom({ sinceTime: new Date(t0.getTime() - 1) })).toEqual({
      [a.droneId]: true,
      [b.droneId]: true,
      [c.droneId]: false,
    });
    expect(Object.values(await seenFrom({ sinceTime: t0 }))).toEqual([false, false, false]);
    const res = await h.cube.dronesSince({ cubeId, anchor: { case: "sinceEntryId", value: ea.id } }, asBearer(user));
    expect(res.anchorTime?.seconds).toBe(BigInt(Math.floor(t0.getTime() / 1000)));
    expect(res.drones.find((d) => d.id === a.droneId)?.lastLogPostAt).toBeDefined();
    expect(res.drones.find((d) => d.id === c.droneId)?.lastLogPostAt).toBeUndefined();
    await expectStatus(
      h.cube.dronesSince({ cubeId, anchor: { case: undefined } }, asBearer(user)),
      status.INVALID_ARGUMENT,
      "anchor",
    );
    await expectStatus(
      h.cube.dronesSince({ cubeId, anchor: { case: "sinceEntryId", value: crypto.randomUUID() } }, asBearer(user)),
      status.NOT_FOUND,
    );
  });
});
