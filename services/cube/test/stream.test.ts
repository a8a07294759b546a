import { toJson } from "@bufbuild/protobuf";
import { status } from "@grpc/grpc-js";
import {
  StreamCloseReason,
  type SubscribeActivityResponse,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { type Entry, EntrySchema, NotificationKind, Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { FLOW_CONTROL_WINDOW } from "@unimatrix/service-kit/grpc";
import { asBearer, eventually, expectStatus } from "@unimatrix/service-kit/testing";
import { type Reader, streamWorld, subscribe } from "./fixtures/stream-reader";
import { CubeAccess, grant, type Harness, newClient, newCube, newTenant, post, type Replica, seat } from "./harness";

let h: Harness;
let b: Replica;
let user: string;
let owner: { id: string; token: string };
beforeAll(async () => {
  ({ h, b, user, owner } = await streamWorld("cube_stream"));
});
afterAll(async () => {
  await h.close();
});

describe("SubscribeActivity rules", () => {
  it("replays from a cursor, then streams live; unset `after` starts at the head; heartbeats carry the cursor", async () => {
    const { cubeId } = await newCube(h, owner.token, "replay");
    const w = await seat(h, owner.token, cubeId);
    const e1 = await post(h, w.token, cubeId, "one");
    const e2 = await post(h, w.token, cubeId, "two");
    const fromStart = subscribe(h, user, cubeId, "");
    const fromE1 = subscribe(h, user, cubeId, e1.cursor);
    const fromHead = subscribe(h, user, cubeId);
    for (const r of [fromStart, fromE1, fromHead])
      await eventually(() => r.events.some((e) => e.event.case === "ready"), "ready");
    const e3 = await post(b, w.token, cubeId, "three");
    await eventually(() => fromHead.entryIds().length === 1, "live entry");
    await eventually(() => fromStart.entryIds().length === 3 && fromE1.entryIds().length === 2, "replay + live");
    expect(fromStart.entryIds()).toEqual([e1.id, e2.id, e3.id]);
    expect(fromE1.entryIds()).toEqual([e2.id, e3.id]);
    expect(fromHead.entryIds()).toEqual([e3.id]);
    const readyIndex = fromStart.events.findIndex((e) => e.event.case === "ready");
    expect(fromStart.events.slice(0, readyIndex).map((e) => e.event.case)).toEqual(["entry", "entry"]);
    await eventually(() => fromHead.events.some((e) => e.event.case === "heartbeat"), "heartbeat");
    await eventually(
      () =>
        fromHead.events
          .slice(fromHead.events.findIndex((e) => e.event.case === "entry"))
          .some((e) => e.event.case === "heartbeat"),
      "heartbeat after the entry",
    );
    const hb = [...fromHead.events].reverse().find((e) => e.event.case === "heartbeat");
    expect(hb?.event.case === "heartbeat" && hb.event.value.cursor).toBe(e3.cursor);
    for (const r of [fromStart, fromE1, fromHead]) r.cancel();
    await expectStatus(
      (async () => {
        for await (const _ of h.activity.subscribeActivity({ cubeId, after: "garbage" }, asBearer(user))) break;
      })(),
      status.INVALID_ARGUMENT,
      "after",
    );
  });

  it("entries appended on the stream's own replica arrive as the log has them (post, DIRECT, reply), once, in order", async () => {
    const { cubeId } = await newCube(h, owner.token, "stream-own");
    const a = await seat(h, owner.token, cubeId);
    const c = await seat(h, owner.token, cubeId);
    // Both on the appending replica: its streams get its own commits without a read back.
    const sa = subscribe(h, a.token, cubeId);
    const sc = subscribe(h, c.token, cubeId);
    const streamed = () => sa.events.flatMap((e) => (e.event.case === "entry" ? [e.event.value] : []));
    /** The log's entries now (the state a read back would have delivered), by id. */
    const logged = async (ids: string[]) => {
      const page = await h.activity.readActivity({ cubeId, pageSize: 500 }, asBearer(a.token));
      const entries = page.items.flatMap((i) => (i.item.case === "entry" ? [i.item.value] : []));
      return ids.map((id) => toJson(EntrySchema, entries.find((e) => e.id === id) as Entry));
    };
    try {
      for (const r of [sa, sc]) await eventually(() => r.events.some((e) => e.event.case === "ready"), "ready");
      const first = await post(h, a.token, cubeId, "own replica");
      const direct = await post(h, a.token, cubeId, "for c", [c.droneId]);
      await eventually(() => sa.entryIds().length >= 2, "two entries");
      expect(streamed().map((e) => toJson(EntrySchema, e))).toEqual(await logged([first.id, direct.id]));
      const reply = await h.activity.appendEntry(
        { cubeId, message: "a reply", visibility: Visibility.BROADCAST, replyToEntryId: first.id },
        asBearer(c.token),
      );
      const ids = [first.id, direct.id, reply.entry?.id as string];
      await eventually(() => sa.entryIds().length >= 3 && sc.entryIds().length >= 3, "three entries on both");
      expect([sa.entryIds(), sc.entryIds()]).toEqual([ids, ids]);
      expect(
        streamed()
          .slice(2)
          .map((e) => toJson(EntrySchema, e)),
      ).toEqual(await logged(ids.slice(2)));
    } finally {
      for (const r of [sa, sc]) r.cancel();
      await Promise.all([sa.done, sc.done]);
    }
    await expectStatus(
      (async () => {
        for await (const _ of h.activity.subscribeActivity({ cubeId: "not-a-uuid" }, asBearer(user))) break;
      })(),
      status.INVALID_ARGUMENT,
      "cube_id",
    );
  });

  it("observers never receive direct entries; notifications reach only their recipient", async () => {
    const { cubeId } = await newCube(h, owner.token, "stream-vis");
    const reader = await newClient(h, user, "reader-s");
    await grant(h, user, reader.id, cubeId, CubeAccess.READ);
    const a = await seat(h, owner.token, cubeId);
    const c = await seat(h, owner.token, cubeId);
    const obs = await seat(h, reader.token, cubeId);
    const sa = subscribe(b, a.token, cubeId);
    const sc = subscribe(b, c.token, cubeId);
    const so = subscribe(b, obs.token, cubeId);
    for (const r of [sa, sc, so]) await eventually(() => r.events.some((e) => e.event.case === "ready"), "ready");
    const direct = await post(h, a.token, cubeId, "for observer", [obs.droneId]);
    const bc = await post(h, a.token, cubeId, "everyone");
    await h.activity.ackEntry({ cubeId, entryId: bc.id }, asBearer(c.token));
    await eventually(() => sa.events.some((e) => e.event.case === "notification"), "ack notification");
    await eventually(() => so.entryIds().length === 1 && sc.entryIds().length === 1, "broadcast on all");
    expect(so.entryIds()).toEqual([bc.id]);
    expect(sa.entryIds()).toEqual([direct.id, bc.id]);
    const note = sa.events.find((e) => e.event.case === "notification");
    expect(note?.event.case === "notification" && note.event.value.kind).toBe(NotificationKind.ACK);
    expect(sc.events.some((e) => e.event.case === "notification")).toBe(false);
    expect(so.events.some((e) => e.event.case === "notification")).toBe(false);
    for (const r of [sa, sc, so]) r.cancel();
  });

  it("a revoked credential gets access_revoked and the stream ends", async () => {
    const { cubeId } = await newCube(h, owner.token, "revoke");
    const a = await seat(h, owner.token, cubeId);
    const s = await subscribe(b, a.token, cubeId);
    await eventually(() => s.events.some((e) => e.event.case === "ready"), "ready");
    await h.cube.evictDrone({ cubeId, droneId: a.droneId }, asBearer(owner.token));
    const result = await s.done;
    expect(result.error).toBeUndefined();
    const last = s.events[s.events.length - 1];
    expect(last?.event.case).toBe("accessRevoked");
  });

  it("rotating a client's credential ends its drone sessions' streams with access_revoked", async () => {
    const rotating = await newClient(h, user, "rotating");
    const { cubeId } = await newCube(h, rotating.token, "rotate-stream");
    const a = await seat(h, rotating.token, cubeId);
    const s = subscribe(b, a.token, cubeId);
    await eventually(() => s.events.some((e) => e.event.case === "ready"), "ready");
    await h.identity.rotateClientCredential({ clientId: rotating.id }, asBearer(user));
    await s.done;
    const last = s.events[s.events.length - 1];
    expect(last?.event.case === "accessRevoked" && last.event.value.reason).toBe("drone session revoked");
  });

  it("a grant lowered to READ turns a streaming participant into an observer", async () => {
    const writer = await newClient(h, user, "lowered");
    const { cubeId } = await newCube(h, owner.token, "lowered");
    await grant(h, user, writer.id, cubeId, CubeAccess.WRITE);
    const sender = await seat(h, owner.token, cubeId);
    const w = await seat(h, writer.token, cubeId);
    const s = subscribe(b, w.token, cubeId);
    await eventually(() => s.events.some((e) => e.event.case === "ready"), "ready");
    const before = await post(h, sender.token, cubeId, "direct while participant", [w.droneId]);
    await eventually(() => s.entryIds().length === 1, "direct entry");
    // The grant change rings the access doorbell before this direct post rings the activity one;
    // the stream re-checks access and filters what arrives meanwhile with the new posture.
    await grant(h, user, writer.id, cubeId, CubeAccess.READ);
    await post(h, sender.token, cubeId, "direct while observer", [w.droneId]);
    const last = await post(h, sender.token, cubeId, "last broadcast");
    await eventually(() => s.entryIds().includes(last.id), "last broadcast");
    const ids = s.entryIds();
    expect(ids[0]).toBe(before.id);
    expect(s.events.filter((e) => e.event.case === "entry" && e.event.value.message.startsWith("direct")).length).toBe(
      1,
    );
    s.cancel();
  });

  it("a stream opened with access_changes is told of every access change on the cube and whose, others are not", async () => {
    const { cubeId } = await newCube(h, owner.token, "access-changes");
    const other = await newClient(h, user, "granted-later");
    const told = subscribe(b, owner.token, cubeId, undefined, true);
    const plain = subscribe(b, owner.token, cubeId);
    await eventually(() => [told, plain].every((s) => s.events.some((e) => e.event.case === "ready")), "ready");
    const changes = (s: Reader) => s.events.filter((e) => e.event.case === "accessChanged").length;
    await grant(h, user, other.id, cubeId, CubeAccess.READ);
    await eventually(() => changes(told) === 1, "told of the grant");
    await h.identity.revokeClient({ clientId: other.id }, asBearer(user));
    await eventually(() => changes(told) === 2, "told of the revocation");
    // Changes are news of their own, in order with the entries.
    const entry = await post(h, owner.token, cubeId, "after the changes");
    await eventually(() => [told, plain].every((s) => s.entryIds().includes(entry.id)), "the entry on both");
    expect(told.events.filter((e) => e.event.case !== "heartbeat").map((e) => e.event.case)).toEqual([
      "ready",
      "accessChanged",
      "accessChanged",
      "entry",
    ]);
    // Each names whose access changed (the client), so a consumer checks only those it serves.
    expect(told.events.flatMap((e) => (e.event.case === "accessChanged" ? [e.event.value.subjectIds] : []))).toEqual([
      [other.id],
      [other.id],
    ]);
    expect(changes(plain)).toBe(0);
    for (const s of [told, plain]) s.cancel();
  });

  it("a foreign tenant's subscription is NOT_FOUND", async () => {
    const { cubeId } = await newCube(h, owner.token, "foreign-stream");
    const other = await newTenant(h, "stream-foreign");
    const foreign = await newClient(h, other.userToken, "foreign");
    for (const token of [other.userToken, foreign.token]) {
      const result = await subscribe(b, token, cubeId, "").done;
      expect(result.error?.code).toBe(status.NOT_FOUND);
    }
  });

  it("at most 10 open streams per credential, counted across replicas", async () => {
    const { cubeId } = await newCube(h, owner.token, "limit");
    // Five on each of two replicas (sharing Redis): the cap is the fleet's, not each replica's.
    const open = [
      ...Array.from({ length: 5 }, () => subscribe(h, owner.token, cubeId)),
      ...Array.from({ length: 5 }, () => subscribe(b, owner.token, cubeId)),
    ];
    for (const r of open) await eventually(() => r.events.some((e) => e.event.case === "ready"), "ready");
    for (const replica of [h, b]) {
      const eleventh = subscribe(replica, owner.token, cubeId);
      const result = await eleventh.done;
      expect(result.error?.code).toBe(status.RESOURCE_EXHAUSTED);
    }
    for (const r of open) r.cancel();
    await Promise.all(open.map((r) => r.done));
    await eventually(async () => {
      const again = subscribe(h, owner.token, cubeId);
      const ok = await Promise.race([
        new Promise<boolean>((resolve) => {
          const t = setInterval(() => {
            if (again.events.some((e) => e.event.case === "ready")) {
              clearInterval(t);
              resolve(true);
            }
          }, 5);
        }),
        again.done.then(() => false),
      ]);
      again.cancel();
      return ok;
    }, "a stream after the others closed");
  });

  it("cuts off a consumer that falls too far behind", async () => {
    const slow = await h.replica({ cube: { streamMaxBacklog: 5 } });
    const { cubeId } = await newCube(h, owner.token, "slow");
    const w = await seat(h, owner.token, cubeId);
    const stream = slow.activity.subscribeActivity({ cubeId }, asBearer(user));
    const events: SubscribeActivityResponse[] = [];
    const iterator = stream[Symbol.asyncIterator]();
    const firstEvent = await iterator.next();
    events.push(firstEvent.value);
    expect(events[0]?.event.case).toBe("ready");
    // Do not read: the entries fill the transport (the client's receive window, twice over), then
    // the server-side queue.
    const big = "x".repeat(30_000);
    const posts = Math.ceil((2 * FLOW_CONTROL_WINDOW) / big.length) + 40;
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < posts) {
          next++;
          await post(h, w.token, cubeId, big);
        }
      }),
    );
    for (;;) {
      const next = await iterator.next();
      if (next.done) break;
      events.push(next.value);
    }
    const last = events[events.length - 1];
    expect(last?.event.case).toBe("closed");
    expect(last?.event.case === "closed" && last.event.value.reason).toBe(StreamCloseReason.SLOW_CONSUMER);
    expect(events.filter((e) => e.event.case === "entry").length).toBeLessThan(posts);
  });
});
