import { randomUUID } from "node:crypto";
import { status } from "@grpc/grpc-js";
import { NoticeService, type WatchNoticesResponse } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import type { Principal } from "@unimatrix/service-kit/auth";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { createClient, type TypedClient } from "@unimatrix/service-kit/grpc";
import { asBearer, asPrincipal, eventually, expectStatus, TEST_INTERNAL_KEY } from "@unimatrix/service-kit/testing";
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
  Visibility,
} from "./harness";

/** A notice stream read in the background. */
class Watch {
  readonly events: WatchNoticesResponse[] = [];
  error: { code?: number; details?: string } | null = null;
  done = false;
  readonly #stream: ReturnType<TypedClient<typeof NoticeService>["watchNotices"]>;

  constructor(client: TypedClient<typeof NoticeService>, machine: Principal) {
    const stream = client.watchNotices({}, asPrincipal(machine, TEST_INTERNAL_KEY));
    this.#stream = stream;
    void (async () => {
      try {
        for await (const event of stream) this.events.push(event);
      } catch (error) {
        this.error = error as { code?: number };
      } finally {
        this.done = true;
      }
    })();
  }

  /** Notice ids received, in order. */
  ids(): string[] {
    return this.events.flatMap((e) => (e.event.case === "notice" ? [e.event.value.id] : []));
  }

  notices() {
    return this.events.flatMap((e) => (e.event.case === "notice" ? [e.event.value] : []));
  }

  heartbeats(): number {
    return this.events.filter((e) => e.event.case === "heartbeat").length;
  }

  /** Waits for `n` more heartbeats: each one is sent after a pass that read the pending notices. */
  async passes(n = 2): Promise<void> {
    const target = this.heartbeats() + n;
    await eventually(() => this.heartbeats() >= target || this.done, `${n} heartbeats`, 15_000);
  }

  cancel(): void {
    this.#stream.cancel();
  }
}

let h: Harness;
let notices: TypedClient<typeof NoticeService>;
const watches: Watch[] = [];

/** A tenant with a cube, a WRITE client, an author drone and a recipient drone (on a machine if given). */
async function world(name: string) {
  const t = await newTenant(h, `${name}-${randomUUID().slice(0, 8)}`);
  const client = await newClient(h, t.userToken, "agent");
  const { cubeId, roleId } = await newCube(h, t.userToken);
  await grant(h, t.userToken, client.id, cubeId, CubeAccess.WRITE);
  const author = await seat(h, client.token, cubeId, roleId);
  const machineId = randomUUID();
  // The recipient's session runs on the machine (AttachSeat `machine_id`).
  const attached = await h.cube.attachSeat({ cubeId, roleId, hostname: "host", machineId }, asBearer(client.token));
  const recipient = {
    droneId: attached.drone?.id as string,
    token: attached.sessionToken,
    label: attached.drone?.label as string,
  };
  const other = await seat(h, client.token, cubeId, roleId);
  const machine: Principal = { kind: "machine", tenantId: t.tenantId, subjectId: machineId };
  return { ...t, client, cubeId, roleId, author, recipient, other, machineId, machine };
}

function watch(machine: Principal, client = notices): Watch {
  const w = new Watch(client, machine);
  watches.push(w);
  return w;
}

beforeAll(async () => {
  h = await startHarness("cube_notices", { cube: { heartbeatMs: 150 } });
  notices = createClient(NoticeService, `127.0.0.1:${h.service.port}`);
});
afterAll(async () => {
  for (const w of watches) w.cancel();
  notices?.close();
  await h?.close();
});

describe("NoticeService", () => {
  it("queues a notice per DIRECT entry to a drone on a machine, in the entry's statement, and streams them oldest first then live", async () => {
    const w0 = await world("acme");
    const first = await post(h, w0.author.token, w0.cubeId, "rebase\n  onto   main", [w0.recipient.droneId]);
    const second = await post(h, w0.author.token, w0.cubeId, "then run the tests", [w0.recipient.droneId]);
    // Broadcasts and DIRECT entries to a drone with no machine queue nothing.
    await post(h, w0.author.token, w0.cubeId, "a broadcast");
    await post(h, w0.recipient.token, w0.cubeId, "to the author", [w0.author.droneId, w0.other.droneId]);
    const rows = await h.sql<{ item_id: string; machine_id: string; tenant_id: string; confirmed_at: Date | null }>(
      "SELECT item_id::text, machine_id::text, tenant_id::text, confirmed_at FROM notices WHERE cube_id = $1 ORDER BY seq",
      [w0.cubeId],
    );
    expect(rows.map((r) => r.item_id)).toEqual([first.id, second.id]);
    expect(rows.every((r) => r.machine_id === w0.machineId && r.tenant_id === w0.tenantId && !r.confirmed_at)).toBe(
      true,
    );

    const w = watch(w0.machine);
    await eventually(() => w.ids().length >= 2, "the two pending notices");
    const [a, b] = w.notices();
    expect(a).toMatchObject({
      cubeId: w0.cubeId,
      droneId: w0.recipient.droneId,
      droneLabel: w0.recipient.label,
      entryId: first.id,
      text: `[DIRECT] ${w0.author.label}: rebase onto main`,
    });
    expect(b?.entryId).toBe(second.id);
    // Live: a new one arrives on the open stream.
    const third = await post(h, w0.author.token, w0.cubeId, "live one", [w0.recipient.droneId]);
    await eventually(() => w.ids().length >= 3, "the live notice");
    expect(w.notices()[2]?.entryId).toBe(third.id);
    // Each notice once per stream, however many passes.
    await w.passes();
    expect(w.ids()).toHaveLength(3);
    expect(new Set(w.ids()).size).toBe(3);
  });

  it("a REPLY notification to a drone on a machine queues a notice too (any notice kind, through insertNotifications)", async () => {
    const w0 = await world("reply");
    // The machine's drone starts a thread; the author replies in it: the thread's author is told.
    const root = await post(h, w0.recipient.token, w0.cubeId, "who owns the flaky test?");
    const w = watch(w0.machine);
    const { entry: reply } = await h.activity.appendEntry(
      { cubeId: w0.cubeId, message: "I do", visibility: Visibility.BROADCAST, replyToEntryId: root.id },
      asBearer(w0.author.token),
    );
    await eventually(() => w.ids().length >= 1, "the REPLY notice");
    expect(w.notices()[0]).toMatchObject({ entryId: reply?.id, droneId: w0.recipient.droneId, text: "[REPLY] I do" });
    const rows = await h.sql<{ item_type: string; notification_kind: string }>(
      `SELECT a.item_type, a.notification_kind FROM notices n JOIN activity_items a ON a.id = n.item_id
       WHERE n.machine_id = $1`,
      [w0.machineId],
    );
    expect(rows).toEqual([{ item_type: "notification", notification_kind: "reply" }]);
    // Its confirmation is the reply's delivery to the notified drone.
    const as = asPrincipal(w0.machine, TEST_INTERNAL_KEY);
    expect(await notices.confirmNotice({ noticeId: w.ids()[0] as string }, as)).toMatchObject({ newlyConfirmed: true });
    const [receipt] = await h.sql<{ delivered_via: string }>(
      "SELECT delivered_via FROM receipts WHERE entry_id = $1 AND drone_id = $2",
      [reply?.id, w0.recipient.droneId],
    );
    expect(receipt?.delivered_via).toBe("machine_link");
  });

  it("a DIRECT reply to the thread's author is one notice (the entry), not the entry and a REPLY too", async () => {
    const w0 = await world("direct-reply");
    const root = await post(h, w0.recipient.token, w0.cubeId, "may I merge?");
    const { entry: reply } = await h.activity.appendEntry(
      {
        cubeId: w0.cubeId,
        message: "yes",
        visibility: Visibility.DIRECT,
        recipientDroneIds: [w0.recipient.droneId],
        replyToEntryId: root.id,
      },
      asBearer(w0.author.token),
    );
    const rows = await h.sql<{ item_type: string; entry_id: string | null }>(
      `SELECT a.item_type, n.entry_id::text FROM notices n JOIN activity_items a ON a.id = n.item_id
       WHERE n.machine_id = $1`,
      [w0.machineId],
    );
    expect(rows).toEqual([{ item_type: "entry", entry_id: reply?.id }]);
    const replies = await h.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM activity_items WHERE cube_id = $1 AND notification_kind = 'reply'",
      [w0.cubeId],
    );
    expect(replies[0]?.n).toBe(0);
  });

  it("ConfirmNotice is idempotent; a confirmed notice is never sent again, an unconfirmed one is resent with the same id", async () => {
    const w0 = await world("confirm");
    await post(h, w0.author.token, w0.cubeId, "one", [w0.recipient.droneId]);
    await post(h, w0.author.token, w0.cubeId, "two", [w0.recipient.droneId]);
    const w1 = watch(w0.machine);
    await eventually(() => w1.ids().length >= 2, "two notices");
    const [one, two] = w1.ids() as [string, string];
    const as = asPrincipal(w0.machine, TEST_INTERNAL_KEY);
    expect(await notices.confirmNotice({ noticeId: one }, as)).toMatchObject({ newlyConfirmed: true });
    expect(await notices.confirmNotice({ noticeId: one }, as)).toMatchObject({ newlyConfirmed: false });
    const [row] = await h.sql<{ confirmed_at: Date | null; delivered_at: Date | null; delivered_via: string }>(
      `SELECT n.confirmed_at, r.delivered_at, r.delivered_via FROM notices n
       JOIN receipts r ON r.entry_id = n.entry_id AND r.drone_id = n.drone_id WHERE n.id = $1`,
      [one],
    );
    expect(row?.confirmed_at).toBeInstanceOf(Date);
    // The confirmation is the receipt's delivery, via MACHINE_LINK (the same instant).
    expect(row?.delivered_via).toBe("machine_link");
    expect(row?.delivered_at?.getTime()).toBe(row?.confirmed_at?.getTime());
    w1.cancel();
    // A new watch (a reconnect): only the unconfirmed one, with the same id; then a marker.
    const w2 = watch(w0.machine);
    await eventually(() => w2.ids().length >= 1, "the resend");
    expect(w2.ids()).toEqual([two]);
    const marker = await post(h, w0.author.token, w0.cubeId, "marker", [w0.recipient.droneId]);
    await eventually(() => w2.ids().length >= 2, "the marker");
    expect(w2.notices().map((n) => n.entryId)[1]).toBe(marker.id);
    expect(w2.ids()).not.toContain(one);
  });

  it("a machine sees only its own notices; another machine's or another tenant's is NOT_FOUND and never streamed", async () => {
    const a = await world("tenant-a");
    const b = await world("tenant-b");
    await post(h, a.author.token, a.cubeId, "acme secret", [a.recipient.droneId]);
    const wa = watch(a.machine);
    await eventually(() => wa.ids().length >= 1, "A's notice");
    const secret = wa.ids()[0] as string;
    // B's machine, and another machine of A's own tenant: NOT_FOUND, and nothing changes.
    const otherOfA: Principal = { kind: "machine", tenantId: a.tenantId, subjectId: randomUUID() };
    const sameIdOtherTenant: Principal = { kind: "machine", tenantId: b.tenantId, subjectId: a.machineId };
    for (const who of [b.machine, otherOfA, sameIdOtherTenant]) {
      await expectStatus(
        notices.confirmNotice({ noticeId: secret }, asPrincipal(who, TEST_INTERNAL_KEY)),
        status.NOT_FOUND,
        "notice",
      );
    }
    const [row] = await h.sql<{ confirmed_at: Date | null }>("SELECT confirmed_at FROM notices WHERE id = $1", [
      secret,
    ]);
    expect(row?.confirmed_at).toBeNull();
    // Their watches: B gets B's own notice (the marker) and never A's.
    const wb = watch(b.machine);
    const wx = watch(sameIdOtherTenant);
    const mine = await post(h, b.author.token, b.cubeId, "globex own", [b.recipient.droneId]);
    await eventually(() => wb.ids().length >= 1, "B's notice");
    expect(wb.notices().map((n) => n.entryId)).toEqual([mine.id]);
    await wx.passes();
    expect(wx.ids()).toEqual([]);
  });

  it("refuses every other principal kind with PERMISSION_DENIED and a bad notice_id with INVALID_ARGUMENT", async () => {
    const w0 = await world("kinds");
    const callers = [
      asBearer(w0.userToken),
      asBearer(w0.client.token),
      asBearer(w0.recipient.token),
      asPrincipal({ kind: "device", tenantId: w0.tenantId, subjectId: randomUUID() }, TEST_INTERNAL_KEY),
    ];
    for (const as of callers) {
      await expectStatus(notices.confirmNotice({ noticeId: randomUUID() }, as), status.PERMISSION_DENIED);
      const stream = notices.watchNotices({}, as);
      await expectStatus(
        (async () => {
          for await (const _ of stream) return;
        })(),
        status.PERMISSION_DENIED,
      );
    }
    const machine = asPrincipal(w0.machine, TEST_INTERNAL_KEY);
    await expectStatus(
      notices.confirmNotice({ noticeId: "not-a-uuid" }, machine),
      status.INVALID_ARGUMENT,
      "notice_id",
    );
    await expectStatus(notices.confirmNotice({ noticeId: "" }, machine), status.INVALID_ARGUMENT, "notice_id");
    await expectStatus(notices.confirmNotice({ noticeId: randomUUID() }, machine), status.NOT_FOUND);
  });

  it("a watch on a replica whose bus is down still gets notices committed elsewhere (the poll)", async () => {
    const w0 = await world("busdown");
    const deaf = await h.replica({ redisUrl: "redis://127.0.0.1:1", cube: { heartbeatMs: 150 } });
    const client = createClient(NoticeService, `127.0.0.1:${deaf.service.port}`);
    try {
      const w = watch(w0.machine, client);
      await w.passes(1);
      // Appended on the first replica: its doorbell never reaches the deaf one.
      const entry = await post(h, w0.author.token, w0.cubeId, "while the bus is down", [w0.recipient.droneId]);
      await eventually(() => w.ids().length >= 1, "the notice by poll", 15_000);
      expect(w.notices()[0]?.entryId).toBe(entry.id);
    } finally {
      client.close();
      await deaf.stop();
    }
  });

  it("ends with going_away when the replica drains, and the machine's watch elsewhere gets the notice", async () => {
    const w0 = await world("drain");
    const other: Replica = await h.replica({ cube: { heartbeatMs: 150 } });
    const client = createClient(NoticeService, `127.0.0.1:${other.service.port}`);
    try {
      const w = watch(w0.machine, client);
      await w.passes(1);
      await other.stop();
      await eventually(() => w.done, "the drained stream's end");
      expect(w.events.at(-1)?.event.case).toBe("goingAway");
      // Queued on the first replica, read by a watch on it after the second went away.
      await post(h, w0.author.token, w0.cubeId, "after the drain", [w0.recipient.droneId]);
      const again = watch(w0.machine);
      await eventually(() => again.ids().length >= 1, "the notice on the surviving replica");
    } finally {
      client.close();
    }
  });
});

describe("notices of the liveness scan's notifications (test clock)", () => {
  const clock = new ManualClock(Date.now());
  let hc: Harness;
  let client: TypedClient<typeof NoticeService>;

  beforeAll(async () => {
    hc = await startHarness("cube_notices_scan", { clock, cube: { heartbeatMs: 150 } });
    client = createClient(NoticeService, `127.0.0.1:${hc.service.port}`);
  });
  afterAll(async () => {
    client?.close();
    await hc?.close();
  });

  it("UNREAD_NUDGE and CLAIM_STALE to a drone on a machine reach its watch as notices, each once", async () => {
    const t = await newTenant(hc, `scan-${randomUUID().slice(0, 8)}`);
    const agents = await newClient(hc, t.userToken, "agent");
    const { cubeId, roleId } = await newCube(hc, t.userToken);
    await grant(hc, t.userToken, agents.id, cubeId, CubeAccess.WRITE);
    const author = await seat(hc, agents.token, cubeId, roleId);
    const machineId = randomUUID();
    const onMachine = await hc.cube.attachSeat({ cubeId, roleId, hostname: "box", machineId }, asBearer(agents.token));
    const recipient = onMachine.drone?.id as string;
    // The machine's drone claims a broadcast (the holder is told when its claim turns stale), and
    // gets a DIRECT entry it never reads (the unread nudge).
    const task = await post(hc, author.token, cubeId, "take this task");
    await hc.activity.claimEntry({ cubeId, entryId: task.id }, asBearer(onMachine.sessionToken));
    const direct = await post(hc, author.token, cubeId, "answer me", [recipient]);
    const w = new Watch(client, { kind: "machine", tenantId: t.tenantId, subjectId: machineId });
    try {
      await eventually(() => w.ids().length >= 1, "the DIRECT notice");
      // Past the claim lease and the nudge deadline: one round stales the claim and nudges.
      clock.advance(3_600_000);
      await hc.service.livenessRound();
      await hc.service.livenessRound();
      await eventually(() => w.ids().length >= 3, "the nudge and stale notices", 15_000);
      await w.passes();
      const texts = w.notices().map((n) => `${n.entryId}:${n.text.split(" ")[0]}`);
      expect(texts.sort()).toEqual([`${direct.id}:[DIRECT]`, `${direct.id}:[UNREAD]`, `${task.id}:[STALE]`].sort());
      expect(new Set(w.ids()).size).toBe(3);
    } finally {
      w.cancel();
    }
  });
});
