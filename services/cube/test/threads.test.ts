import { status } from "@grpc/grpc-js";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import { notifications, seatedCube } from "./fixtures/coordination";
import { type Harness, post, type Replica, startHarness } from "./harness";

describe("issue 16 coordination: threads and acks", () => {
  const clock = new ManualClock(Date.UTC(2026, 6, 1, 8));
  let h: Harness;
  let r2: Replica;
  beforeAll(async () => {
    h = await startHarness("cube_threads", { clock });
    r2 = await h.replica();
  });
  afterAll(async () => {
    await h.close();
  });

  const world = (label: string, drones = 3) => seatedCube(h, label, drones);

  it("threads: a reply notifies the thread's author and participants who can see it, ReadThread returns it in order, bad reply_to codes", async () => {
    const w = await world("threads", 4);
    const [a, b, c, d] = w.seats as [
      (typeof w.seats)[number],
      (typeof w.seats)[number],
      (typeof w.seats)[number],
      (typeof w.seats)[number],
    ];
    const reply = (token: string, to: string, message: string, recipients: string[] = []) =>
      h.activity
        .appendEntry(
          {
            cubeId: w.cubeId,
            message,
            visibility: recipients.length ? Visibility.DIRECT : Visibility.BROADCAST,
            recipientDroneIds: recipients,
            replyToEntryId: to,
          },
          asBearer(token),
        )
        .then((r) => r.entry as NonNullable<typeof r.entry>);
    const root = await post(h, a.token, w.cubeId, "plan for the release?");
    const r1 = await reply(b.token, root.id, "ship friday");
    expect(r1.replyToEntryId).toBe(root.id);
    expect(r1.threadRootEntryId).toBe(root.id);
    clock.advance(31_000);
    const r2e = await reply(c.token, r1.id, "agree");
    expect(r2e.threadRootEntryId).toBe(root.id);
    expect(r2e.replyToEntryId).toBe(r1.id);
    clock.advance(31_000);
    // A DIRECT reply to A only: B cannot see it, so B is not told; A gets the entry itself (one
    // delivery, one notice), not a REPLY on top.
    const r3 = await reply(c.token, root.id, "psst, A only", [a.droneId]);
    const replies = await notifications(h, w.cubeId, ["reply"]);
    const byRecipient = (id: string) => replies.filter((n) => n.recipient === id).reduce((s, n) => s + n.n, 0);
    expect(byRecipient(a.droneId)).toBe(2); // r1, r2 (r3 is addressed to A)
    expect(byRecipient(b.droneId)).toBe(1); // r2 (not r1: its own; not r3: cannot see it)
    expect(byRecipient(c.droneId)).toBe(0); // its own replies; r1 came before it joined
    expect(byRecipient(d.droneId)).toBe(0); // never posted in the thread
    const notified = await h.sql<{ entry_id: string; recipient: string }>(
      `SELECT entry_id::text, recipient_drone_ids[1]::text AS recipient FROM activity_items
       WHERE cube_id = $1 AND notification_kind = 'reply' ORDER BY position`,
      [w.cubeId],
    );
    expect(notified.map((n) => `${n.entry_id}>${n.recipient}`).sort()).toEqual(
      [`${r1.id}>${a.droneId}`, `${r2e.id}>${a.droneId}`, `${r2e.id}>${b.droneId}`].sort(),
    );

    // ReadThread from any reply: the root and the visible replies in order; paging.
    const user = asBearer(w.t.userToken);
    const whole = await h.activity.readThread({ cubeId: w.cubeId, entryId: r2e.id }, user);
    expect(whole.root?.id).toBe(root.id);
    expect(whole.root?.replyCount).toBe(3);
    expect(whole.replies.map((e) => e.id)).toEqual([r1.id, r2e.id, r3.id]);
    const asB = await h.activity.readThread({ cubeId: w.cubeId, entryId: root.id }, asBearer(b.token));
    expect(asB.replies.map((e) => e.id)).toEqual([r1.id, r2e.id]);
    const p1 = await h.activity.readThread({ cubeId: w.cubeId, entryId: root.id, pageSize: 2 }, user);
    expect(p1.replies.map((e) => e.id)).toEqual([r1.id, r2e.id]);
    expect(p1.nextPageToken).not.toBe("");
    const p2 = await h.activity.readThread(
      { cubeId: w.cubeId, entryId: root.id, pageSize: 2, pageToken: p1.nextPageToken },
      user,
    );
    expect(p2.replies.map((e) => e.id)).toEqual([r3.id]);
    expect(p2.nextPageToken).toBe("");
    // A drone's ReadThread marks its receipts read (A got a receipt for r3 as a DIRECT recipient).
    await h.activity.readThread({ cubeId: w.cubeId, entryId: root.id }, asBearer(a.token));
    const r3receipts = (await h.activity.listReceipts({ cubeId: w.cubeId, entryId: r3.id }, asBearer(c.token)))
      .receipts;
    expect(r3receipts.map((r) => [r.droneId, r.readAt !== undefined])).toEqual([[a.droneId, true]]);

    // Bad reply_to: malformed INVALID_ARGUMENT; unknown, invisible, a notification or another cube's NOT_FOUND.
    await expectStatus(reply(b.token, "NOT-A-UUID", "x"), status.INVALID_ARGUMENT, "reply_to_entry_id");
    await expectStatus(reply(b.token, crypto.randomUUID(), "x"), status.NOT_FOUND, "reply_to_entry_id");
    await expectStatus(reply(b.token, r3.id, "x"), status.NOT_FOUND, "reply_to_entry_id");
    const [aNotice] = await h.sql<{ id: string }>(
      `SELECT id::text FROM activity_items WHERE cube_id = $1 AND item_type = 'notification' LIMIT 1`,
      [w.cubeId],
    );
    await expectStatus(reply(b.token, aNotice?.id as string, "x"), status.NOT_FOUND, "reply_to_entry_id");
    const other = await world("threads-other", 1);
    const foreign = await post(h, other.seats[0]?.token as string, other.cubeId, "elsewhere");
    await expectStatus(reply(b.token, foreign.id, "x"), status.NOT_FOUND, "reply_to_entry_id");
    await expectStatus(h.activity.readThread({ cubeId: w.cubeId, entryId: foreign.id }, user), status.NOT_FOUND);
  });

  it("two drones acking each other's entries and replying 'ack' in a loop produce a bounded, counted number of notifications", async () => {
    const w = await world("storm", 2);
    const [a, b] = w.seats as [(typeof w.seats)[number], (typeof w.seats)[number]];
    let lastA = await post(h, a.token, w.cubeId, "status: build green");
    let lastB = await post(h, b.token, w.cubeId, "status: tests green");
    const round = async () => {
      await h.activity.ackEntry({ cubeId: w.cubeId, entryId: lastB.id }, asBearer(a.token));
      await r2.activity.ackEntry({ cubeId: w.cubeId, entryId: lastA.id }, asBearer(b.token));
      const ra = await h.activity.appendEntry(
        { cubeId: w.cubeId, message: "ack", visibility: Visibility.BROADCAST, replyToEntryId: lastB.id },
        asBearer(a.token),
      );
      const rb = await r2.activity.appendEntry(
        { cubeId: w.cubeId, message: "ack", visibility: Visibility.BROADCAST, replyToEntryId: ra.entry?.id },
        asBearer(b.token),
      );
      lastA = ra.entry as typeof lastA;
      lastB = rb.entry as typeof lastB;
    };
    for (let i = 0; i < 25; i++) await round();
    const count = async () => (await notifications(h, w.cubeId, ["ack", "reply"])).reduce((s, n) => s + n.n, 0);
    // Within one 30 s window: one ACK and one REPLY each way.
    expect(await count()).toBe(4);
    expect((await notifications(h, w.cubeId, ["ack", "reply"])).every((n) => n.n === 1)).toBe(true);
    // A window later, one more of each way at most.
    clock.advance(30_000);
    for (let i = 0; i < 25; i++) await round();
    expect(await count()).toBe(8);
    // The acks themselves are all recorded.
    const acks = await h.sql<{ n: string }>(
      `SELECT count(*) AS n FROM acks k JOIN activity_items e ON e.id = k.entry_id WHERE e.cube_id = $1`,
      [w.cubeId],
    );
    expect(Number(acks[0]?.n)).toBe(100);
  });

  it("quiet acks and acks of no-reply entries notify no one", async () => {
    const w = await world("quiet", 2);
    const [a, b] = w.seats as [(typeof w.seats)[number], (typeof w.seats)[number]];
    const e1 = await post(h, a.token, w.cubeId, "one");
    const quiet = await h.activity.ackEntry({ cubeId: w.cubeId, entryId: e1.id, quiet: true }, asBearer(b.token));
    expect(quiet.newlyAcked).toBe(true);
    expect(quiet.entry?.ackCount).toBe(1);
    const e2 = await h.activity.appendEntry(
      { cubeId: w.cubeId, message: "ok", visibility: Visibility.BROADCAST, expectsReply: false },
      asBearer(a.token),
    );
    await h.activity.ackEntry({ cubeId: w.cubeId, entryId: e2.entry?.id as string }, asBearer(b.token));
    expect(await notifications(h, w.cubeId, ["ack"])).toEqual([]);
    // A plain ack still notifies.
    const e3 = await post(h, a.token, w.cubeId, "three");
    await h.activity.ackEntry({ cubeId: w.cubeId, entryId: e3.id }, asBearer(b.token));
    expect(await notifications(h, w.cubeId, ["ack"])).toEqual([{ kind: "ack", recipient: a.droneId, n: 1 }]);
  });
});
