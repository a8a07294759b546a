import { status } from "@grpc/grpc-js";
import type { SubscribeActivityResponse } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import {
  DeliveryChannel,
  NotificationKind,
  SeatState,
  Visibility,
} from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { asBearer, eventually, expectStatus } from "@unimatrix/service-kit/testing";
import { notifications, seatedCube } from "./fixtures/coordination";
import {
  CubeAccess,
  grant,
  type Harness,
  newClient,
  newCube,
  newTenant,
  post,
  type Replica,
  seat,
  startHarness,
} from "./harness";

const NUDGE_S = 600;

function subscribe(r: Replica, token: string, cubeId: string) {
  const controller = new AbortController();
  const events: SubscribeActivityResponse[] = [];
  const stream = r.activity.subscribeActivity({ cubeId }, { ...asBearer(token), signal: controller.signal });
  const done = (async () => {
    try {
      for await (const event of stream) events.push(event);
    } catch {
      // cancelled
    }
  })();
  return {
    events,
    async stop() {
      controller.abort();
      await done;
    },
  };
}

describe("issue 16 coordination: receipts, nudges, threads, hygiene, questions, seat state", () => {
  const clock = new ManualClock(Date.UTC(2026, 6, 1, 8));
  let h: Harness;
  let r2: Replica;
  beforeAll(async () => {
    h = await startHarness("cube_coordination", { clock });
    r2 = await h.replica();
  });
  afterAll(async () => {
    await h.close();
  });

  const world = (label: string, drones = 3) => seatedCube(h, label, drones);

  it("a DIRECT entry shows delivered → read → acked for its recipient as those happen", async () => {
    const w = await world("receipts");
    const [a, b, c] = w.seats as [(typeof w.seats)[number], (typeof w.seats)[number], (typeof w.seats)[number]];
    // B's live stream is open (ready) before the entry is posted.
    const stream = subscribe(r2, b.token, w.cubeId);
    await eventually(() => stream.events.some((e) => e.event.case === "ready"), "the stream is ready", 10_000);
    const entry = await post(h, a.token, w.cubeId, "please review PR 12", [b.droneId]);
    const receipts = () =>
      h.activity.listReceipts({ cubeId: w.cubeId, entryId: entry.id }, asBearer(a.token)).then((r) => r.receipts);
    let [r] = await receipts();
    expect(r?.droneId).toBe(b.droneId);
    expect(r?.label).toBe(b.label);
    expect(r?.readAt).toBeUndefined();
    expect(r?.ackedAt).toBeUndefined();

    // Delivered: B's live stream (on the other replica) sent it; recorded in a batch shortly after.
    await eventually(
      async () => (await receipts())[0]?.deliveredVia === DeliveryChannel.STREAM,
      "the stream delivery is recorded",
      10_000,
    );
    [r] = await receipts();
    expect(r?.deliveredAt).toBeDefined();
    expect(r?.readAt).toBeUndefined();
    await stream.stop();

    // A peek (a parked wait polling for B) returns it and marks nothing read.
    const peeked = await h.activity.readActivity({ cubeId: w.cubeId, peek: true }, asBearer(b.token));
    expect(peeked.items.some((i) => i.item.case === "entry" && i.item.value.id === entry.id)).toBe(true);
    [r] = await receipts();
    expect(r?.readAt).toBeUndefined();

    // Read: B's read returns it.
    clock.advance(1000);
    await h.activity.readUnread({ cubeId: w.cubeId }, asBearer(b.token));
    [r] = await receipts();
    expect(r?.readAt).toBeDefined();
    expect(r?.ackedAt).toBeUndefined();

    // Acked.
    clock.advance(1000);
    await h.activity.ackEntry({ cubeId: w.cubeId, entryId: entry.id }, asBearer(b.token));
    [r] = await receipts();
    expect(r?.ackedAt).toBeDefined();
    expect(Number(r?.deliveredAt?.seconds)).toBeLessThan(Number(r?.readAt?.seconds));
    expect(Number(r?.readAt?.seconds)).toBeLessThan(Number(r?.ackedAt?.seconds));

    // The author and users list receipts; another drone may not; unknown entries are NOT_FOUND.
    expect(
      (await h.activity.listReceipts({ cubeId: w.cubeId, entryId: entry.id }, asBearer(w.t.userToken))).receipts,
    ).toHaveLength(1);
    await expectStatus(
      h.activity.listReceipts({ cubeId: w.cubeId, entryId: entry.id }, asBearer(b.token)),
      status.PERMISSION_DENIED,
    );
    await expectStatus(
      h.activity.listReceipts({ cubeId: w.cubeId, entryId: entry.id }, asBearer(c.token)),
      status.NOT_FOUND,
    );
    // A broadcast keeps no receipts.
    const broadcast = await post(h, a.token, w.cubeId, "fyi");
    expect(
      (await h.activity.listReceipts({ cubeId: w.cubeId, entryId: broadcast.id }, asBearer(a.token))).receipts,
    ).toEqual([]);
  });

  it("an unread DIRECT entry nudges its recipient exactly once (scans on two replicas, several rounds); read or no-reply entries never", async () => {
    const w = await world("nudges");
    const [a, b, c] = w.seats as [(typeof w.seats)[number], (typeof w.seats)[number], (typeof w.seats)[number]];
    const unread = await post(h, a.token, w.cubeId, "are you there?", [b.droneId, c.droneId]);
    const fyi = await h.activity.appendEntry(
      {
        cubeId: w.cubeId,
        message: "fyi only",
        visibility: Visibility.DIRECT,
        recipientDroneIds: [b.droneId],
        expectsReply: false,
      },
      asBearer(a.token),
    );
    expect(fyi.entry?.expectsReply).toBe(false);
    await h.activity.readUnread({ cubeId: w.cubeId }, asBearer(c.token)); // C reads it in time
    const nudgesHere = (rounds: { nudges: { entryId: string; droneId: string }[] }[]) =>
      rounds.flatMap((r) => r.nudges).filter((n) => n.entryId === unread.id || n.entryId === fyi.entry?.id);
    clock.advance((NUDGE_S - 1) * 1000);
    expect(nudgesHere(await Promise.all([h.service.livenessRound(), r2.service.livenessRound()]))).toEqual([]);
    clock.advance(1000);
    const first = nudgesHere(await Promise.all([h.service.livenessRound(), r2.service.livenessRound()]));
    expect(first).toEqual([{ entryId: unread.id, droneId: b.droneId }]);
    for (let i = 0; i < 3; i++) {
      clock.advance(NUDGE_S * 1000);
      expect(nudgesHere(await Promise.all([h.service.livenessRound(), r2.service.livenessRound()]))).toEqual([]);
    }
    expect(await notifications(h, w.cubeId, ["unread_nudge"])).toEqual([
      { kind: "unread_nudge", recipient: b.droneId, n: 1 },
    ]);
    const receipts = (await h.activity.listReceipts({ cubeId: w.cubeId, entryId: unread.id }, asBearer(a.token)))
      .receipts;
    expect(receipts.map((r) => [r.droneId, r.nudgedAt !== undefined])).toEqual([
      [b.droneId, true],
      [c.droneId, false],
    ]);
    // B sees the nudge, text tagged [UNREAD].
    const inbox = await h.activity.readUnread({ cubeId: w.cubeId }, asBearer(b.token));
    const nudge = inbox.items.flatMap((i) =>
      i.item.case === "notification" && i.item.value.kind === NotificationKind.UNREAD_NUDGE ? [i.item.value] : [],
    );
    expect(nudge.map((n) => [n.text, n.entryId])).toEqual([["[UNREAD] are you there?", unread.id]]);
  });

  it("questions go to the live human seats, stay open until a user or human seat replies", async () => {
    const w = await world("questions", 1);
    const a = w.seats[0] as (typeof w.seats)[number];
    const user = asBearer(w.t.userToken);
    // No human seat yet: DIRECT with no recipients is allowed (users see every entry).
    const lonely = await h.activity.appendEntry(
      { cubeId: w.cubeId, message: "anyone?", visibility: Visibility.DIRECT, askHuman: true },
      asBearer(a.token),
    );
    expect(lonely.entry?.question).toBe(true);
    expect(lonely.entry?.recipientDroneIds).toEqual([]);
    const { role } = await h.cube.createRole({ cubeId: w.cubeId, name: "human", humanSeat: true }, user);
    const human = await seat(h, w.owner.token, w.cubeId, role?.id);
    const asked = await h.activity.appendEntry(
      { cubeId: w.cubeId, message: "may I drop table users?", visibility: Visibility.DIRECT, askHuman: true },
      asBearer(a.token),
    );
    const q = asked.entry as NonNullable<typeof asked.entry>;
    expect(q.recipientDroneIds).toEqual([human.droneId]);
    expect(q.question).toBe(true);
    let open = await h.activity.listQuestions({ cubeId: w.cubeId }, user);
    expect(open.questions.map((x) => x.entry?.id)).toEqual([q.id, lonely.entry?.id]);
    // A worker drone's reply does not answer it.
    const other = await seat(h, w.owner.token, w.cubeId);
    await h.activity.appendEntry(
      {
        cubeId: w.cubeId,
        message: "no idea",
        visibility: Visibility.DIRECT,
        recipientDroneIds: [a.droneId],
        replyToEntryId: lonely.entry?.id,
      },
      asBearer(a.token),
    );
    void other;
    // The human seat answers (as a reply); a user answers the other.
    const answer = await h.activity.appendEntry(
      {
        cubeId: w.cubeId,
        message: "no.",
        visibility: Visibility.DIRECT,
        recipientDroneIds: [a.droneId],
        replyToEntryId: q.id,
      },
      asBearer(human.token),
    );
    open = await h.activity.listQuestions({ cubeId: w.cubeId }, user);
    expect(open.questions.map((x) => x.entry?.id)).toEqual([lonely.entry?.id]);
    const userAnswer = await h.activity.appendEntry(
      { cubeId: w.cubeId, message: "hi", visibility: Visibility.BROADCAST, replyToEntryId: lonely.entry?.id },
      user,
    );
    expect((await h.activity.listQuestions({ cubeId: w.cubeId }, user)).questions).toEqual([]);
    const all = await h.activity.listQuestions({ cubeId: w.cubeId, includeAnswered: true }, asBearer(a.token));
    expect(all.questions.map((x) => [x.entry?.id, x.answer?.id])).toEqual([
      [q.id, answer.entry?.id],
      [lonely.entry?.id, userAnswer.entry?.id],
    ]);
    // The asking drone's thread read returns the answer.
    const thread = await h.activity.readThread({ cubeId: w.cubeId, entryId: q.id }, asBearer(a.token));
    expect(thread.replies.map((e) => e.message)).toEqual(["no."]);
  });

  it("seat state: only changes are recorded, as one BROADCAST entry; every drone list shows it; machine_id is kept", async () => {
    const t = await newTenant(h, "seat-state");
    const owner = await newClient(h, t.userToken, "owner");
    const watcher = await newClient(h, t.userToken, "watcher");
    const { cubeId } = await newCube(h, owner.token, "cube", { canBroadcast: false });
    await grant(h, t.userToken, watcher.id, cubeId, CubeAccess.READ);
    const machineId = crypto.randomUUID();
    const attached = await h.cube.attachSeat({ cubeId, hostname: "box", machineId }, asBearer(owner.token));
    expect(attached.drone?.machineId).toBe(machineId);
    const a = { token: attached.sessionToken, droneId: attached.drone?.id as string };
    const observer = await seat(h, watcher.token, cubeId);
    const entries = async () =>
      Number(
        (
          await h.sql<{ n: string }>(
            `SELECT count(*) AS n FROM activity_items WHERE cube_id = $1 AND item_type = 'entry'`,
            [cubeId],
          )
        )[0]?.n,
      );
    clock.advance(1000);
    const set = await h.cube.setSeatState(
      { cubeId, state: SeatState.WAITING, note: "on CI run 42" },
      asBearer(a.token),
    );
    expect(set.changed).toBe(true);
    expect(set.drone?.state).toBe(SeatState.WAITING);
    expect(set.drone?.stateNote).toBe("on CI run 42");
    expect(set.entry?.seatState?.state).toBe(SeatState.WAITING);
    expect(set.entry?.seatState?.note).toBe("on CI run 42");
    expect(set.entry?.visibility).toBe(Visibility.BROADCAST);
    expect(set.entry?.expectsReply).toBe(false);
    expect(await entries()).toBe(1);
    const changedAt = set.drone?.stateChangedAt?.seconds;
    clock.advance(5000);
    const same = await h.cube.setSeatState(
      { cubeId, state: SeatState.WAITING, note: "on CI run 42" },
      asBearer(a.token),
    );
    expect(same.changed).toBe(false);
    expect(same.entry).toBeUndefined();
    expect(same.drone?.stateChangedAt?.seconds).toBe(changedAt);
    expect(await entries()).toBe(1);
    // An observer may set its own seat too.
    const obs = await h.cube.setSeatState({ cubeId, state: SeatState.BLOCKED, note: "" }, asBearer(observer.token));
    expect(obs.changed).toBe(true);
    expect(await entries()).toBe(2);
    // Lists show it.
    const list = await h.cube.listDrones({ cubeId }, asBearer(t.userToken));
    const mine = list.drones.find((d) => d.id === a.droneId);
    expect(mine?.state).toBe(SeatState.WAITING);
    expect(mine?.machineId).toBe(machineId);
    const since = await h.cube.dronesSince(
      { cubeId, anchor: { case: "sinceEntryId", value: set.entry?.id as string } },
      asBearer(t.userToken),
    );
    expect(since.drones.find((d) => d.id === observer.droneId)?.state).toBe(SeatState.BLOCKED);
    // Not a drone session: FAILED_PRECONDITION; UNSPECIFIED: INVALID_ARGUMENT naming state.
    await expectStatus(
      h.cube.setSeatState({ cubeId, state: SeatState.IDLE }, asBearer(t.userToken)),
      status.FAILED_PRECONDITION,
    );
    await expectStatus(
      h.cube.setSeatState({ cubeId, state: SeatState.UNSPECIFIED }, asBearer(a.token)),
      status.INVALID_ARGUMENT,
      "state",
    );
    await expectStatus(
      h.cube.setSeatState({ cubeId: crypto.randomUUID(), state: SeatState.IDLE }, asBearer(a.token)),
      status.NOT_FOUND,
    );
  });
});
