import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import {
  AckEntryRequestSchema,
  AppendEntryRequestSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { ConfirmNoticeRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import { type Principal, parseToken } from "@unimatrix/service-kit/auth";
import { FailedPreconditionError, NotFoundError, PermissionDeniedError } from "@unimatrix/service-kit/errors";
import { asBearer } from "@unimatrix/service-kit/testing";
import type { CubeDeps } from "../src/deps";
import type { Effects } from "../src/effects";
import { activityHandlers } from "../src/handlers/activity";
import { noticeHandlers } from "../src/handlers/notices";
import { ackEntry } from "../src/ops/ack";
import { appendEntry } from "../src/ops/append";
import { attachSeat } from "../src/ops/attach-seat";
import { claimEntry } from "../src/ops/claim";
import { confirmNotice } from "../src/ops/confirm-notice";
import { evictDrone } from "../src/ops/evict-drone";
import { livenessRound } from "../src/ops/liveness";
import { noteRead } from "../src/ops/note-read";
import { readUnread } from "../src/ops/read-unread";
import { releaseClaim } from "../src/ops/release";
import { renewClaim } from "../src/ops/renew";
import { replyToEntry } from "../src/ops/reply";
import { setSeatState } from "../src/ops/seat-state";
import { takeOverClaim } from "../src/ops/take-over";
import { resolveToken } from "../src/reads/credentials";
import { ACTIVITY, cubeChannel, noticeChannel } from "../src/rules/channels";
import { encodeCursor } from "../src/rules/cursor";
import type { EntryRef, NewEntry } from "../src/rules/entry";
import { authTag } from "../src/store/auth-cache";
import { pendingNotices } from "../src/tables/notices";
import { createCallContext } from "./call-context";
import {
  CubeAccess,
  grant,
  type Harness,
  newClient,
  newCube,
  newTenant,
  seat,
  startHarness,
  Visibility,
} from "./harness";

// The op and handler levels: each write path called as a function on a replica's real
// dependencies (Postgres, the bus), no socket in between; its result and its effects asserted.

let h: Harness;
let deps: CubeDeps;

beforeAll(async () => {
  h = await startHarness("ops");
  deps = h.service.deps;
});
afterAll(async () => {
  await h.close();
});

/** The principal a token resolves to (as the service's auth interceptor would). */
async function principalOf(token: string): Promise<Principal> {
  const parsed = parseToken(token);
  if (!parsed) throw new Error("not a token");
  const resolved = await resolveToken(deps, parsed);
  if (!resolved) throw new Error("token did not resolve");
  return resolved.principal;
}

/** A tenant with a cube, a WRITE client, two drones, and a third drone whose session runs on a machine. */
async function world() {
  const t = await newTenant(h, `ops-${randomUUID().slice(0, 8)}`);
  const client = await newClient(h, t.userToken, "agent");
  const { cubeId, roleId } = await newCube(h, t.userToken);
  await grant(h, t.userToken, client.id, cubeId, CubeAccess.WRITE);
  const a = await seat(h, client.token, cubeId, roleId);
  const b = await seat(h, client.token, cubeId, roleId);
  const machineId = randomUUID();
  const attached = await h.cube.attachSeat({ cubeId, roleId, hostname: "host", machineId }, asBearer(client.token));
  return {
    ...t,
    cubeId,
    roleId,
    client: { ...client, principal: await principalOf(client.token) },
    user: await principalOf(t.userToken),
    a: { ...a, principal: await principalOf(a.token) },
    b: { ...b, principal: await principalOf(b.token) },
    onMachine: { droneId: attached.drone?.id as string, principal: await principalOf(attached.sessionToken) },
    machineId,
  };
}

const broadcast = (message: string, more: Partial<NewEntry> = {}): NewEntry => ({
  message,
  visibility: "broadcast",
  recipientDroneIds: [],
  recipientLabels: [],
  expectsReply: true,
  askHuman: false,
  ...more,
});

/** An entry named by its id, as a handler passes it on. */
const byId = (id: string): EntryRef => ({ field: "entry_id", id });

/** Resolves with the first message published on a bus channel after the call. */
async function nextMessage(channel: string): Promise<{ message: Promise<string>; stop(): Promise<void> }> {
  let resolve: (message: string) => void = () => {};
  const message = new Promise<string>((r) => (resolve = r));
  const subscription = await deps.bus.subscribe(channel, (m: string) => resolve(m));
  return { message, stop: () => subscription.unsubscribe() };
}

describe("ops: each write path returns its result and the effects to publish after its commit", () => {
  test("append: a broadcast rings the cube; a DIRECT post to a drone on a machine also rings that machine", async () => {
    const w = await world();
    const posted = await appendEntry(deps, w.a.principal, w.cubeId, broadcast("hello"));
    expect(posted.result.row.position).toBeGreaterThan(0n);
    const through = (position: bigint) => ({ cubeId: w.cubeId, position });
    expect(posted.effects).toEqual({
      activity: [w.cubeId],
      through: through(posted.result.row.position),
      noticeMachines: [],
    });
    const direct = await appendEntry(
      deps,
      w.a.principal,
      w.cubeId,
      broadcast("for you", { visibility: "direct", recipientDroneIds: [w.onMachine.droneId] }),
    );
    expect(direct.effects).toEqual({
      activity: [w.cubeId],
      through: through(direct.result.row.position),
      noticeMachines: [w.machineId],
    });
    expect(direct.result.row.position).toBe(posted.result.row.position + 1n);
  });

  test("reply: the thread author on a machine gets a REPLY whose notice rings its machine", async () => {
    const w = await world();
    const root = await appendEntry(deps, w.onMachine.principal, w.cubeId, broadcast("question?"));
    const reply = await replyToEntry(deps, w.a.principal, w.cubeId, {
      ...broadcast("answer"),
      replyTo: byId(root.result.row.id),
    });
    expect(reply.result.row.threadRootEntryId).toBe(root.result.row.id);
    expect(reply.effects).toEqual({ activity: [w.cubeId], noticeMachines: [w.machineId] });
    // A reply to an entry that is not there is NOT_FOUND naming the field, and changes nothing.
    await expect(
      replyToEntry(deps, w.a.principal, w.cubeId, {
        ...broadcast("x"),
        replyTo: { field: "reply_to_entry_id", id: randomUUID() },
      }),
    ).rejects.toThrow(NotFoundError);
  });

  test("ack: a new ack rings the cube; a repeat is no news", async () => {
    const w = await world();
    const entry = await appendEntry(deps, w.a.principal, w.cubeId, broadcast("ack me"));
    const first = await ackEntry(deps, w.b.principal, w.cubeId, byId(entry.result.row.id));
    expect(first.result.newlyAcked).toBe(true);
    expect(first.result.entry.state.ackedByDroneIds).toEqual([w.b.droneId]);
    expect(first.effects).toEqual({ activity: [w.cubeId] });
    const again = await ackEntry(deps, w.b.principal, w.cubeId, byId(entry.result.row.id));
    expect(again.result.newlyAcked).toBe(false);
    expect(again.effects).toEqual({});
  });

  test("claim, renew, release: only changes of holder ring the cube", async () => {
    const w = await world();
    const entry = await appendEntry(deps, w.a.principal, w.cubeId, broadcast("claim me"));
    const id = entry.result.row.id;
    const claimed = await claimEntry(deps, w.a.principal, w.cubeId, byId(id));
    expect(claimed.result.outcome).toBe("claimed");
    expect(claimed.result.claim?.fence).toBe(1n);
    expect(claimed.effects).toEqual({ activity: [w.cubeId] });
    const held = await claimEntry(deps, w.a.principal, w.cubeId, byId(id));
    expect(held.result.outcome).toBe("held");
    expect(held.effects).toEqual({});
    const other = await claimEntry(deps, w.b.principal, w.cubeId, byId(id));
    expect(other.result.outcome).toBe("other");
    expect((await renewClaim(deps, w.b.principal, w.cubeId, byId(id))).result.outcome).toBe("not_holder");
    const renewed = await renewClaim(deps, w.a.principal, w.cubeId, byId(id));
    expect(renewed.result.outcome).toBe("renewed");
    expect(renewed.effects).toEqual({});
    expect((await releaseClaim(deps, w.b.principal, w.cubeId, byId(id))).result.outcome).toBe("other");
    const released = await releaseClaim(deps, w.a.principal, w.cubeId, byId(id));
    expect(released.result.outcome).toBe("released");
    expect(released.effects).toEqual({ activity: [w.cubeId] });
    const none = await releaseClaim(deps, w.a.principal, w.cubeId, byId(id));
    expect(none.result.outcome).toBe("none");
    expect(none.effects).toEqual({});
    expect((await claimEntry(deps, w.b.principal, w.cubeId, byId(id))).result.claim?.fence).toBe(2n);
  });

  test("take-over: a HELD claim is not taken; a STALE one is, with fence + 1, telling the former holder", async () => {
    const w = await world();
    const entry = await appendEntry(deps, w.a.principal, w.cubeId, broadcast("take me"));
    const id = entry.result.row.id;
    await claimEntry(deps, w.onMachine.principal, w.cubeId, byId(id));
    const notStale = await takeOverClaim(deps, w.a.principal, w.cubeId, byId(id), 1n);
    expect(notStale.result.outcome).toBe("not_stale");
    expect(notStale.effects).toEqual({ activity: [], noticeMachines: [] });
    await h.sql(`UPDATE claims SET state = 'stale' WHERE entry_id = $1`, [id]);
    const moved = await takeOverClaim(deps, w.a.principal, w.cubeId, byId(id), 2n);
    expect(moved.result.outcome).toBe("fence_moved");
    const taken = await takeOverClaim(deps, w.a.principal, w.cubeId, byId(id), 1n);
    expect(taken.result.outcome).toBe("take_over");
    expect(taken.result.claim?.fence).toBe(2n);
    expect(taken.result.claim?.holderDroneId).toBe(w.a.droneId);
    // The former holder's session runs on a machine: its TAKEOVER notice rings it.
    expect(taken.effects).toEqual({ activity: [w.cubeId], noticeMachines: [w.machineId] });
  });

  test("confirm-notice: once per notice, only by its machine; no effects", async () => {
    const w = await world();
    await appendEntry(
      deps,
      w.a.principal,
      w.cubeId,
      broadcast("deliver me", { visibility: "direct", recipientDroneIds: [w.onMachine.droneId] }),
    );
    const [notice] = await pendingNotices(deps.fast, w.tenantId, w.machineId, 10);
    if (!notice) throw new Error("no notice queued");
    await expect(confirmNotice(deps, w.tenantId, randomUUID(), notice.id)).rejects.toThrow(NotFoundError);
    expect(await confirmNotice(deps, w.tenantId, w.machineId, notice.id)).toEqual({ result: true, effects: {} });
    expect(await confirmNotice(deps, w.tenantId, w.machineId, notice.id)).toEqual({ result: false, effects: {} });
    expect(await pendingNotices(deps.fast, w.tenantId, w.machineId, 10)).toEqual([]);
  });

  test("attach-seat: a new drone has no effects; reattaching a prior drone drops its cached access", async () => {
    const w = await world();
    const created = await attachSeat(deps, w.client.principal, { cubeId: w.cubeId, hostname: "h1" });
    if (created.result.outcome !== "created") throw new Error(created.result.outcome);
    expect(created.effects).toEqual({});
    const droneId = created.result.drone.drone.id;
    await h.sql(`UPDATE drone_sessions SET revoked_at = now() WHERE drone_id = $1`, [droneId]);
    const again = await attachSeat(deps, w.client.principal, {
      cubeId: w.cubeId,
      hostname: "h2",
      priorDroneId: droneId,
    });
    if (again.result.outcome !== "created") throw new Error(again.result.outcome);
    expect(again.result.drone.drone.id).toBe(droneId);
    expect(again.effects).toEqual({ authTags: [authTag.drone(droneId)] });
    const reused = await attachSeat(deps, w.client.principal, {
      cubeId: w.cubeId,
      hostname: "h2",
      sessionToken: again.result.token,
    });
    expect(reused.result.outcome).toBe("reused");
    expect(reused.effects).toEqual({});
    await expect(attachSeat(deps, w.a.principal, { cubeId: w.cubeId, hostname: "h" })).rejects.toThrow(
      PermissionDeniedError,
    );
  });

  test("seat-state: a change is an entry that rings the cube; the same state again changes nothing", async () => {
    const w = await world();
    const changed = await setSeatState(deps, w.a.principal, w.cubeId, "working", "on it");
    expect(changed.result.entry?.row.seatState).toBe("working");
    expect(changed.effects).toEqual({ activity: [w.cubeId] });
    const same = await setSeatState(deps, w.a.principal, w.cubeId, "working", "on it");
    expect(same.result.entry).toBeNull();
    expect(same.effects).toEqual({});
    await expect(setSeatState(deps, w.user, w.cubeId, "idle", "")).rejects.toThrow(FailedPreconditionError);
  });

  test("evict-drone: drops the drone's cached access and tells the cube's streams whose access changed", async () => {
    const w = await world();
    const evicted = await evictDrone(deps, w.user, w.cubeId, w.b.droneId);
    expect(evicted.result.revoked).toBe(1);
    expect(evicted.effects).toEqual({
      authTags: [authTag.drone(w.b.droneId)],
      access: { cubeIds: [w.cubeId], subjectIds: [w.b.droneId] },
    });
  });

  test("read-unread and note-read: the inbox moves past what was returned; reads publish nothing", async () => {
    const w = await world();
    await appendEntry(deps, w.a.principal, w.cubeId, broadcast("one"));
    await appendEntry(deps, w.a.principal, w.cubeId, broadcast("two"));
    const page = await readUnread(deps, w.b.principal, w.cubeId, 10);
    expect(page.result.items.map((i) => i.row.message)).toEqual(["one", "two"]);
    expect(page.effects).toEqual({});
    expect((await noteRead(deps, w.b.principal, page.result.items)).effects).toEqual({});
    const next = await readUnread(deps, w.b.principal, w.cubeId, 10);
    expect(next.result.items).toEqual([]);
    expect(next.result.after).toBe(page.result.last);
  });

  test("read-unread: reads of one drone at the same time return every item once, in order, whichever read moves the inbox", async () => {
    const w = await world();
    const sent = Array.from({ length: 24 }, (_, i) => `m${i}`);
    for (const message of sent) await appendEntry(deps, w.a.principal, w.cubeId, broadcast(message));
    const pages = await Promise.all(Array.from({ length: 8 }, () => readUnread(deps, w.b.principal, w.cubeId, 3)));
    // Another round for what the first left (a read that lost every try took the locked path).
    const rest = await readUnread(deps, w.b.principal, w.cubeId, 100);
    const pageTexts = pages.map((p) => p.result.items.map((i) => i.row.message ?? ""));
    const got = [...pageTexts.flat(), ...rest.result.items.map((i) => i.row.message ?? "")];
    expect(got.sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)))).toEqual(sent);
    for (const texts of pageTexts)
      expect(texts).toEqual([...texts].sort((a, b) => Number(a.slice(1)) - Number(b.slice(1))));
    expect((await readUnread(deps, w.b.principal, w.cubeId, 100)).result.items).toEqual([]);
  });

  test("read-unread confirm_through: a peek's cursor moves the inbox to it and delivers (hook) what lay before it, never backwards; a cursor ahead is INVALID_ARGUMENT", async () => {
    const w = await world();
    const direct = (message: string) =>
      appendEntry(
        deps,
        w.a.principal,
        w.cubeId,
        broadcast(message, { visibility: "direct", recipientDroneIds: [w.b.droneId] }),
      );
    const first = (await direct("first")).result.row.id;
    const peeked = await readUnread(deps, w.b.principal, w.cubeId, 10, true);
    expect(peeked.result.items.map((i) => i.row.message)).toEqual(["first"]);
    const shown = encodeCursor(w.cubeId, peeked.result.last);
    const second = (await direct("second")).result.row.id;
    const receipt = (entryId: string) =>
      deps.prisma.receipt.findFirstOrThrow({ where: { entryId, droneId: w.b.droneId } });
    expect((await receipt(first)).deliveredVia).toBeNull();

    // Confirming what was shown: "first" delivered via hook and read; the peek then sees only "second".
    const next = await readUnread(deps, w.b.principal, w.cubeId, 10, true, shown);
    expect(next.result.items.map((i) => i.row.message)).toEqual(["second"]);
    expect(await receipt(first)).toMatchObject({ deliveredVia: "hook", readAt: expect.any(Date) });
    expect((await receipt(second)).deliveredVia).toBeNull();

    // The inbox moves past "second" (a plain read); an older cursor sent again moves nothing back.
    await readUnread(deps, w.b.principal, w.cubeId, 10);
    const stale = await readUnread(deps, w.b.principal, w.cubeId, 10, true, shown);
    expect(stale.result.items).toEqual([]);
    expect((await receipt(second)).deliveredVia).toBeNull(); // read, not shown by a hook

    const ahead = encodeCursor(w.cubeId, peeked.result.last + 1000n);
    await expect(readUnread(deps, w.b.principal, w.cubeId, 10, true, ahead)).rejects.toThrow(/confirm_through.*ahead/);
  });

  test("liveness round: each step's effects are handed to the publisher after its own commit", async () => {
    const published: Effects[] = [];
    const round = await livenessRound(deps, async (effects) => {
      published.push(effects);
    });
    expect(published).toHaveLength(3);
    expect(published.map((e) => Object.keys(e).sort())).toEqual([
      ["activity"],
      ["activity", "noticeMachines"],
      ["activity", "noticeMachines"],
    ]);
    expect(published[0]?.activity).toHaveLength(round.pinged.length);
  });
});

describe("handlers on a call context: no socket, the real store and bus", () => {
  test("AppendEntry answers the entry and rings the cube's doorbell after the commit", async () => {
    const w = await world();
    const handlers = activityHandlers(deps, h.service.feed);
    const doorbell = await nextMessage(cubeChannel(w.cubeId));
    try {
      const request = create(AppendEntryRequestSchema, {
        cubeId: w.cubeId,
        message: "via handler",
        visibility: Visibility.BROADCAST,
      });
      const response = await handlers.appendEntry(
        request,
        createCallContext({ principal: w.a.principal, logger: deps.logger }),
      );
      expect(response.entry?.message).toBe("via handler");
      expect(response.entry?.author?.droneId).toBe(w.a.droneId);
      // The doorbell names the entry's position (a replica that already has it skips the read).
      expect(await doorbell.message).toBe(`${ACTIVITY}:${response.entry?.position}`);
    } finally {
      await doorbell.stop();
    }
  });

  test("AckEntry without a credential is UNAUTHENTICATED; with one, it acks", async () => {
    const w = await world();
    const handlers = activityHandlers(deps, h.service.feed);
    const entry = await appendEntry(deps, w.a.principal, w.cubeId, broadcast("ack via handler"));
    const request = create(AckEntryRequestSchema, { cubeId: w.cubeId, entryId: entry.result.row.id });
    await expect(handlers.ackEntry(request, createCallContext({ logger: deps.logger }))).rejects.toMatchObject({
      code: 16,
    });
    const acked = await handlers.ackEntry(
      request,
      createCallContext({ principal: w.b.principal, logger: deps.logger }),
    );
    expect(acked.newlyAcked).toBe(true);
  });

  test("ConfirmNotice confirms the calling machine's notice once", async () => {
    const w = await world();
    const posted = await handlersAppendDirect(w);
    expect(await posted.rang).toBe("notice");
    const [notice] = await pendingNotices(deps.fast, w.tenantId, w.machineId, 10);
    if (!notice) throw new Error("no notice queued");
    const handlers = noticeHandlers(deps);
    const machine: Principal = { kind: "machine", tenantId: w.tenantId, subjectId: w.machineId };
    const request = create(ConfirmNoticeRequestSchema, { noticeId: notice.id });
    const context = () => createCallContext({ principal: machine, logger: deps.logger });
    expect((await handlers.confirmNotice(request, context())).newlyConfirmed).toBe(true);
    expect((await handlers.confirmNotice(request, context())).newlyConfirmed).toBe(false);
  });
});

/** A DIRECT post to the machine's drone through the handler; resolves `rang` with the machine doorbell's message. */
async function handlersAppendDirect(w: Awaited<ReturnType<typeof world>>) {
  const doorbell = await nextMessage(noticeChannel(w.machineId));
  const handlers = activityHandlers(deps, h.service.feed);
  const request = create(AppendEntryRequestSchema, {
    cubeId: w.cubeId,
    message: "direct via handler",
    visibility: Visibility.DIRECT,
    recipientDroneIds: [w.onMachine.droneId],
  });
  await handlers.appendEntry(request, createCallContext({ principal: w.a.principal, logger: deps.logger }));
  return { rang: doorbell.message.finally(() => doorbell.stop()) };
}
