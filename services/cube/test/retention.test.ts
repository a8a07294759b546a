// Retention (issue 29 item 4): the leased retention round prunes by age and by count with a test
// clock, keeps what holders hold, runs on one replica at a time, and a cursor below the floor
// answers FAILED_PRECONDITION on ReadActivity and a `reset` on SubscribeActivity — on Postgres
// (two replicas) and on the embedded PGlite store. Rounds at scale: retention-rounds.test.ts.
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
import { ManualClock } from "@unimatrix/service-kit/clock";
import { createClient } from "@unimatrix/service-kit/grpc";
import { asBearer, collect, expectStatus, testConfig } from "@unimatrix/service-kit/testing";
import { startCube } from "../src/service";
import { type Harness, OPERATOR_TOKEN, post, type Replica, seat, startHarness, Visibility } from "./harness";
import { HOUR, messagesAfter, mine, type Place, retainedCube, SETTINGS } from "./retention-world";

/** The scenarios both stores answer alike. */
function scenarios(place: () => Place) {
  it("prunes by age with a test clock: the floor rises to the newest aged position, acks go with their entries, old cursors expire", async () => {
    const p = place();
    const w = await retainedCube(p, "ret-age", 3600, 0);
    const a = await seat(p.r, w.owner.token, w.cubeId);
    const old = [];
    for (const m of ["old-1", "old-2", "old-3"]) old.push(await post(p.r, a.token, w.cubeId, m));
    await p.r.activity.ackEntry({ cubeId: w.cubeId, entryId: old[0]!.id }, asBearer(w.t.userToken));
    p.clock.advance(2 * HOUR);
    await post(p.r, a.token, w.cubeId, "new-1");
    await post(p.r, a.token, w.cubeId, "new-2");

    const round = await p.r.service.retentionRound();
    expect(round.held).toBe(true);
    expect(mine(round, w.cubeId)).toEqual([
      expect.objectContaining({ floor: old[2]!.position, entries: 3, notifications: 0, acks: 1 }),
    ]);
    const { cube } = await p.r.cube.getCube({ cubeId: w.cubeId }, asBearer(w.t.userToken));
    expect(cube?.floorCursor).toBe(old[2]!.cursor);
    // Empty = from the floor; a cursor at the floor resumes; one below it expired.
    expect(await messagesAfter(p, w.t.userToken, w.cubeId, "")).toEqual(["new-1", "new-2"]);
    expect(await messagesAfter(p, w.t.userToken, w.cubeId, old[2]!.cursor)).toEqual(["new-1", "new-2"]);
    await expectStatus(
      p.r.activity.readActivity({ cubeId: w.cubeId, cursor: old[0]!.cursor }, asBearer(w.t.userToken)),
      status.FAILED_PRECONDITION,
      "cursor has expired",
    );
    // Nothing more is due: a second round changes nothing.
    expect(mine(await p.r.service.retentionRound(), w.cubeId)).toEqual([]);
  });

  it("prunes by count in batches: only the newest max_items positions stay", async () => {
    const p = place();
    const w = await retainedCube(p, "ret-count", 0, 4);
    const a = await seat(p.r, w.owner.token, w.cubeId);
    for (let i = 1; i <= 10; i++) await post(p.r, a.token, w.cubeId, `m-${i}`);
    const round = await p.r.service.retentionRound();
    // Batches of 3: 6 items in three statements.
    expect(mine(round, w.cubeId)).toEqual([expect.objectContaining({ floor: 6n, entries: 6 })]);
    expect(await messagesAfter(p, w.t.userToken, w.cubeId, "")).toEqual(["m-7", "m-8", "m-9", "m-10"]);
  });

  it("keeps live claims, open questions, unread directs of live drones and thread roots with stored replies; prunes the rest", async () => {
    const p = place();
    const w = await retainedCube(p, "ret-keep", 3600, 0);
    const holder = await seat(p.r, w.owner.token, w.cubeId);
    const reader = await seat(p.r, w.owner.token, w.cubeId);
    const gone = await seat(p.r, w.owner.token, w.cubeId);
    const claimed = await post(p.r, holder.token, w.cubeId, "claimed");
    await p.r.activity.claimEntry({ cubeId: w.cubeId, entryId: claimed.id }, asBearer(holder.token));
    const released = await post(p.r, holder.token, w.cubeId, "released");
    await p.r.activity.claimEntry({ cubeId: w.cubeId, entryId: released.id }, asBearer(holder.token));
    await p.r.activity.releaseClaim({ cubeId: w.cubeId, entryId: released.id }, asBearer(holder.token));
    const question = await p.r.activity.appendEntry(
      { cubeId: w.cubeId, message: "question", visibility: Visibility.DIRECT, askHuman: true },
      asBearer(holder.token),
    );
    const unread = await post(p.r, holder.token, w.cubeId, "unread direct", [reader.droneId]);
    const read = await post(p.r, holder.token, w.cubeId, "read direct", [gone.droneId]);
    const evicted = await post(p.r, holder.token, w.cubeId, "to an evicted drone", [gone.droneId]);
    const root = await post(p.r, holder.token, w.cubeId, "thread root");
    await post(p.r, holder.token, w.cubeId, "plain broadcast");
    // `gone` reads what it got (the first direct), then is evicted.
    await p.r.activity.readThread({ cubeId: w.cubeId, entryId: read.id }, asBearer(gone.token));
    await p.r.cube.evictDrone({ cubeId: w.cubeId, droneId: gone.droneId }, asBearer(w.t.userToken));
    p.clock.advance(2 * HOUR);
    await p.r.activity.appendEntry(
      { cubeId: w.cubeId, message: "late reply", visibility: Visibility.BROADCAST, replyToEntryId: root.id },
      asBearer(reader.token),
    );

    const round = await p.r.service.retentionRound();
    expect(round.cubes.map((c) => c.cubeId)).toContain(w.cubeId);
    const left = await p.r.service.deps.prisma.activityItem.findMany({
      where: { cubeId: w.cubeId, itemType: "entry" },
      orderBy: { position: "asc" },
      select: { message: true },
    });
    expect(left.map((e) => e.message)).toEqual(["claimed", "question", "unread direct", "thread root", "late reply"]);
    // Receipts and claims went with their entries; the kept ones keep theirs.
    const db = p.r.service.deps.prisma;
    expect(await db.receipt.count({ where: { entryId: { in: [read.id, evicted.id] } } })).toBe(0);
    expect(await db.claim.count({ where: { entryId: released.id } })).toBe(0);
    expect(await db.claim.count({ where: { entryId: claimed.id, state: "held" } })).toBe(1);
    expect(await db.receipt.count({ where: { entryId: unread.id, readAt: null } })).toBe(1);

    // What is kept stays reachable by id, not by cursor: the reader's inbox still has its direct.
    const inbox = await p.r.activity.readUnread({ cubeId: w.cubeId }, asBearer(reader.token));
    const inboxMessages = inbox.items.flatMap((i) => (i.item.case === "entry" ? [i.item.value.message] : []));
    expect(inboxMessages).toContain("unread direct");
    expect(await messagesAfter(p, w.t.userToken, w.cubeId, "")).toEqual(["late reply"]);

    // Released and read, the next rise of the floor takes them.
    await p.r.activity.releaseClaim({ cubeId: w.cubeId, entryId: claimed.id }, asBearer(holder.token));
    await p.r.activity.appendEntry(
      { cubeId: w.cubeId, message: "answer", visibility: Visibility.BROADCAST, replyToEntryId: question.entry!.id },
      asBearer(w.t.userToken),
    );
    p.clock.advance(2 * HOUR);
    await post(p.r, holder.token, w.cubeId, "later");
    await p.r.service.retentionRound();
    const after = await db.activityItem.findMany({
      where: { cubeId: w.cubeId, itemType: "entry" },
      orderBy: { position: "asc" },
      select: { message: true },
    });
    // The claim is released, the question answered, the reader read its direct (ReadUnread), the
    // thread's reply aged out with its root; only the newest post is left.
    expect(after.map((e) => e.message)).toEqual(["later"]);
  });

  it("a stream resuming below the floor gets reset{floor cursor}, then every item after the floor exactly once, then live ones", async () => {
    const p = place();
    const w = await retainedCube(p, "ret-stream", 3600, 0);
    const a = await seat(p.r, w.owner.token, w.cubeId);
    const old = [];
    for (let i = 1; i <= 5; i++) old.push(await post(p.r, a.token, w.cubeId, `old-${i}`));
    p.clock.advance(2 * HOUR);
    for (let i = 1; i <= 3; i++) await post(p.r, a.token, w.cubeId, `new-${i}`);
    await p.r.service.retentionRound();
    const floorCursor = old[4]!.cursor;

    const stream = p.r.activity.subscribeActivity({ cubeId: w.cubeId, after: old[1]!.cursor }, asBearer(a.token));
    stream.on("data", (event: SubscribeActivityResponse) => {
      if (event.event.case === "ready") void post(p.r, a.token, w.cubeId, "live");
    });
    const events = await collect<SubscribeActivityResponse>(
      stream,
      (e) => e.event.case === "entry" && e.event.value.message === "live",
    );
    const seen = events.flatMap((e) =>
      e.event.case === "reset"
        ? [`reset:${e.event.value.cursor}`]
        : e.event.case === "entry"
          ? [e.event.value.message]
          : e.event.case === "ready"
            ? ["ready"]
            : [],
    );
    expect(seen).toEqual([`reset:${floorCursor}`, "new-1", "new-2", "new-3", "ready", "live"]);

    // From an empty cursor: the floor, no reset.
    const fromOldest = await collect<SubscribeActivityResponse>(
      p.r.activity.subscribeActivity({ cubeId: w.cubeId, after: "" }, asBearer(a.token)),
      (e) => e.event.case === "ready",
    );
    expect(fromOldest.map((e) => e.event.case).filter((c) => c !== "heartbeat")).toEqual([
      "entry",
      "entry",
      "entry",
      "entry",
      "ready",
    ]);
  });
}

/** A replica's counter, summed over the series whose `label` is `value`. */
async function counted(r: Replica, name: string, label: string, value: string): Promise<number> {
  const { values } = await r.service.metrics.registry.getSingleMetric(name)!.get();
  return values.filter((v) => v.labels[label] === value).reduce((n, v) => n + v.value, 0);
}

describe("retention on Postgres (two replicas)", () => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 8));
  let h: Harness;
  let r2: Replica;
  beforeAll(async () => {
    h = await startHarness("cube_retention", { clock, cube: SETTINGS });
    r2 = await h.replica();
  });
  afterAll(async () => {
    await h.close();
  });

  scenarios(() => ({ r: h, clock }));

  it("runs on one replica at a time: of two rounds at once one holds the lease and prunes; the other takes over once it expires", async () => {
    const p = { r: h as Replica, clock };
    const w = await retainedCube(p, "ret-lease", 0, 2);
    const a = await seat(h, w.owner.token, w.cubeId);
    for (let i = 1; i <= 8; i++) await post(h, a.token, w.cubeId, `m-${i}`);
    const rounds = await Promise.all([h.service.retentionRound(), r2.service.retentionRound()]);
    const holders = rounds.filter((r) => r.held);
    expect(holders).toHaveLength(1);
    expect(rounds.flatMap((r) => mine(r, w.cubeId))).toEqual([expect.objectContaining({ floor: 6n, entries: 6 })]);
    const first = rounds[0]!.held ? h : r2;
    const second = first === h ? r2 : h;
    // Within the lease the other replica is refused, however often it tries; its metrics say so.
    const skipped = await counted(second, "unimatrix_cube_retention_rounds_total", "outcome", "skipped");
    for (let i = 0; i < 3; i++) expect((await second.service.retentionRound()).held).toBe(false);
    expect(await counted(second, "unimatrix_cube_retention_rounds_total", "outcome", "skipped")).toBe(skipped + 3);
    expect(await counted(first, "unimatrix_cube_retention_pruned_total", "kind", "entries")).toBeGreaterThanOrEqual(6);
    // The holder goes quiet past its lease (at least a minute): the other takes over and prunes.
    clock.advance(61_000);
    await post(h, a.token, w.cubeId, "m-9");
    const takeover = await second.service.retentionRound();
    expect(takeover.held).toBe(true);
    expect(mine(takeover, w.cubeId)).toEqual([expect.objectContaining({ floor: 7n, entries: 1 })]);
    expect((await first.service.retentionRound()).held).toBe(false);
  });

  it("UpdateCube refuses retention out of range naming the field, and changes nothing", async () => {
    const p = { r: h as Replica, clock };
    const w = await retainedCube(p, "ret-bad", 60, 10);
    await expectStatus(
      h.cube.updateCube(
        { cubeId: w.cubeId, retention: { maxAgeSeconds: 315_360_001, maxItems: 0 } },
        asBearer(w.t.userToken),
      ),
      status.INVALID_ARGUMENT,
      "retention.max_age_seconds",
    );
    const { cube } = await h.cube.getCube({ cubeId: w.cubeId }, asBearer(w.t.userToken));
    expect(cube?.retention).toMatchObject({ maxAgeSeconds: 60, maxItems: 10 });
    // Zeros return the cube to the service defaults.
    const reset = await h.cube.updateCube({ cubeId: w.cubeId, retention: {} }, asBearer(w.t.userToken));
    expect(reset.cube?.retention).toMatchObject({ maxAgeSeconds: 0, maxItems: 0 });
  });
});

describe("retention on the embedded store (PGlite)", () => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 8));
  const dataDir = mkdtempSync(join(tmpdir(), "cube-retention-"));
  let r: Replica;
  beforeAll(async () => {
    const service = await startCube({
      config: testConfig({ databaseUrl: undefined, redisUrl: undefined, dataDir, operatorToken: OPERATOR_TOKEN }),
      port: 0,
      clock,
      cube: { livenessIntervalMs: 0, retentionIntervalMs: 0, ...SETTINGS },
    });
    const address = `127.0.0.1:${service.port}`;
    const identity = createClient(IdentityService, address);
    const cube = createClient(CubeService, address);
    const activity = createClient(ActivityService, address);
    r = {
      service,
      identity,
      cube,
      activity,
      async stop() {
        identity.close();
        cube.close();
        activity.close();
        await service.stop();
      },
    };
  });
  afterAll(async () => {
    await r.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  scenarios(() => ({ r, clock }));
});
