import { status } from "@grpc/grpc-js";
import { ClaimOutcome, ReleaseOutcome } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { type ActivityItem, NotificationKind, Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import { CubeAccess, grant, type Harness, newClient, newCube, newTenant, post, seat, startHarness } from "./harness";

let h: Harness;
let user: string;
let owner: { id: string; token: string };
beforeAll(async () => {
  h = await startHarness("cube_activity");
  const t = await newTenant(h, "activity");
  user = t.userToken;
  owner = await newClient(h, user, "owner");
});
afterAll(async () => {
  await h.close();
});

const count = async (table: string) =>
  Number((await h.sql<{ n: string }>(`SELECT count(*)::text AS n FROM ${table}`))[0]?.n);
const entries = (items: ActivityItem[]) => items.flatMap((i) => (i.item.case === "entry" ? [i.item.value] : []));
const notes = (items: ActivityItem[]) => items.flatMap((i) => (i.item.case === "notification" ? [i.item.value] : []));
async function readAll(token: string, cubeId: string) {
  const res = await h.activity.readActivity({ cubeId, pageSize: 500 }, asBearer(token));
  return res.items;
}

describe("append", () => {
  it("validates visibility, recipients, message and kind, naming the field and writing nothing", async () => {
    const { cubeId } = await newCube(h, owner.token);
    await h.cube.updateCube({ cubeId, taxonomyJson: JSON.stringify({ kinds: ["status"] }) }, asBearer(owner.token));
    const a = await seat(h, owner.token, cubeId);
    const before = await count("activity_items");
    const append = (req: Record<string, unknown>) =>
      h.activity.appendEntry({ cubeId, message: "m", visibility: Visibility.BROADCAST, ...req }, asBearer(a.token));
    await expectStatus(append({ visibility: Visibility.UNSPECIFIED }), status.INVALID_ARGUMENT, "visibility");
    await expectStatus(append({ visibility: 9 }), status.INVALID_ARGUMENT, "visibility");
    await expectStatus(append({ visibility: Visibility.DIRECT }), status.INVALID_ARGUMENT, "recipient_drone_ids");
    await expectStatus(append({ recipientDroneIds: [a.droneId] }), status.INVALID_ARGUMENT, "recipient_drone_ids");
    await expectStatus(
      append({ visibility: Visibility.DIRECT, recipientDroneIds: [crypto.randomUUID()] }),
      status.INVALID_ARGUMENT,
      "recipient_drone_ids",
    );
    await expectStatus(
      append({ visibility: Visibility.DIRECT, recipientDroneIds: ["nope"] }),
      status.INVALID_ARGUMENT,
      "recipient_drone_ids",
    );
    await expectStatus(
      append({ visibility: Visibility.DIRECT, recipientDroneIds: [a.droneId, a.droneId] }),
      status.INVALID_ARGUMENT,
      "recipient_drone_ids",
    );
    await expectStatus(append({ message: "   " }), status.INVALID_ARGUMENT, "message");
    await expectStatus(append({ message: "x".repeat(32_769) }), status.INVALID_ARGUMENT, "message");
    await expectStatus(append({ message: "nul \u0000 inside" }), status.INVALID_ARGUMENT, "message");
    await expectStatus(
      append({ visibility: Visibility.DIRECT, recipientDroneIds: [a.droneId.toUpperCase()] }),
      status.INVALID_ARGUMENT,
      "recipient_drone_ids",
    );
    await expectStatus(append({ kind: "unknown" }), status.INVALID_ARGUMENT, "kind");
    await expectStatus(append({ cubeId: "bad" }), status.INVALID_ARGUMENT, "cube_id");
    expect(await count("activity_items")).toBe(before);
    const ok = await append({ kind: "status" });
    expect(ok.entry?.kind).toBe("status");
    expect(await count("activity_items")).toBe(before + 1);
  });

  it("readable-only cubes, observers and non-broadcasting roles cannot post what they may not", async () => {
    const { cubeId } = await newCube(h, owner.token, "rights", { canBroadcast: false });
    const reader = await newClient(h, user, "reader-a");
    await grant(h, user, reader.id, cubeId, CubeAccess.READ);
    const obs = await seat(h, reader.token, cubeId);
    await expectStatus(post(h, reader.token, cubeId, "hi"), status.PERMISSION_DENIED);
    await expectStatus(post(h, obs.token, cubeId, "hi"), status.PERMISSION_DENIED);
    const w = await seat(h, owner.token, cubeId);
    await expectStatus(post(h, w.token, cubeId, "broadcast"), status.PERMISSION_DENIED);
    const direct = await post(h, w.token, cubeId, "direct", [obs.droneId]);
    expect(direct.visibility).toBe(Visibility.DIRECT);
    expect(direct.author?.droneId).toBe(w.droneId);
    expect(direct.author?.label).toBe(w.label);
  });

  it("50 parallel appends get 50 distinct, strictly ordered positions", async () => {
    const { cubeId } = await newCube(h, owner.token, "parallel");
    const a = await seat(h, owner.token, cubeId);
    const posted = await Promise.all(Array.from({ length: 50 }, (_, i) => post(h, a.token, cubeId, `m${i}`)));
    expect(new Set(posted.map((e) => e.cursor)).size).toBe(50);
    const read = entries(await readAll(user, cubeId));
    // Every acknowledged append is read back exactly once, under the cursor it was given.
    expect(new Set(read.map((e) => e.cursor))).toEqual(new Set(posted.map((e) => e.cursor)));
    const readIds = await h.sql<{ id: string }>(
      "SELECT id::text FROM activity_items WHERE cube_id = $1 ORDER BY position",
      [cubeId],
    );
    expect(read.map((e) => e.id)).toEqual(readIds.map((r) => r.id));
    expect(read.length).toBe(50);
    const positions = await h.sql<{ p: string }>(
      "SELECT position AS p FROM activity_items WHERE cube_id = $1 ORDER BY position",
      [cubeId],
    );
    expect(positions.map((p) => Number(p.p))).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    // Reading in pages of 7 yields the same order with no gap or duplicate.
    const paged: string[] = [];
    let cursor = "";
    for (;;) {
      const page = await h.activity.readActivity({ cubeId, cursor, pageSize: 7 }, asBearer(user));
      paged.push(...entries(page.items).map((e) => e.id));
      cursor = page.nextCursor;
      if (!page.hasMore) break;
    }
    expect(paged).toEqual(read.map((e) => e.id));
  });
});

describe("visibility and reading", () => {
  it("observers see broadcasts only; participants see theirs; receives-all-direct sees every direct", async () => {
    const { cubeId } = await newCube(h, owner.token, "vis");
    const { role: hub } = await h.cube.createRole(
      { cubeId, name: "hub", receivesAllDirect: true },
      asBearer(owner.token),
    );
    const reader = await newClient(h, user, "reader-v");
    await grant(h, user, reader.id, cubeId, CubeAccess.READ);
    const a = await seat(h, owner.token, cubeId);
    const b = await seat(h, owner.token, cubeId);
    const c = await seat(h, owner.token, cubeId);
    const all = await seat(h, owner.token, cubeId, hub?.id);
    const obs = await seat(h, reader.token, cubeId);
    const bc = await post(h, a.token, cubeId, "to everyone");
    const toB = await post(h, a.token, cubeId, "to b", [b.droneId]);
    const toObs = await post(h, a.token, cubeId, "to observer", [obs.droneId]);
    const seen = async (token: string) => entries(await readAll(token, cubeId)).map((e) => e.id);
    expect(await seen(a.token)).toEqual([bc.id, toB.id, toObs.id]);
    expect(await seen(b.token)).toEqual([bc.id, toB.id]);
    expect(await seen(c.token)).toEqual([bc.id]);
    expect(await seen(all.token)).toEqual([bc.id, toB.id, toObs.id]);
    expect(await seen(obs.token)).toEqual([bc.id]);
    expect(await seen(user)).toEqual([bc.id, toB.id, toObs.id]);
    // Acking or claiming an invisible entry is NOT_FOUND.
    await expectStatus(h.activity.ackEntry({ cubeId, entryId: toB.id }, asBearer(c.token)), status.NOT_FOUND);
  });

  it("DronesSince anchored on an entry the caller cannot see is NOT_FOUND, like ReadThread and CheckFence", async () => {
    const { cubeId } = await newCube(h, owner.token, "since-oracle");
    const reader = await newClient(h, user, "reader-since");
    await grant(h, user, reader.id, cubeId, CubeAccess.READ);
    const a = await seat(h, owner.token, cubeId);
    const b = await seat(h, owner.token, cubeId);
    const c = await seat(h, owner.token, cubeId);
    const obs = await seat(h, reader.token, cubeId);
    const toB = await post(h, a.token, cubeId, "between a and b", [b.droneId]);
    const since = (token: string) =>
      h.cube.dronesSince({ cubeId, anchor: { case: "sinceEntryId", value: toB.id } }, asBearer(token));
    for (const outsider of [c.token, obs.token]) {
      const o = asBearer(outsider);
      await expectStatus(h.activity.readThread({ cubeId, entryId: toB.id }, o), status.NOT_FOUND, "entry not found");
      await expectStatus(h.activity.checkFence({ cubeId, entryId: toB.id, fence: 1n }, o), status.NOT_FOUND);
      await expectStatus(since(outsider), status.NOT_FOUND, "since_entry_id");
    }
    // Its author, its recipient and the cube's user still anchor on it.
    for (const insider of [a.token, b.token, user]) {
      const answer = await since(insider);
      expect(answer.drones.length).toBe(4);
    }
  });

  it("cursors: foreign, malformed and ahead-of-head cursors are clear errors", async () => {
    const { cubeId } = await newCube(h, owner.token, "cur1");
    const { cubeId: other } = await newCube(h, owner.token, "cur2");
    const a = await seat(h, owner.token, cubeId);
    const e = await post(h, a.token, cubeId, "x");
    await expectStatus(
      h.activity.readActivity({ cubeId: other, cursor: e.cursor }, asBearer(user)),
      status.INVALID_ARGUMENT,
      "cursor",
    );
    await expectStatus(
      h.activity.readActivity({ cubeId, cursor: "garbage" }, asBearer(user)),
      status.INVALID_ARGUMENT,
      "cursor",
    );
    const page = await h.activity.readActivity({ cubeId, cursor: e.cursor }, asBearer(user));
    expect(page.items).toEqual([]);
    expect(page.nextCursor).toBe(e.cursor);
    expect(page.hasMore).toBe(false);
  });

  it("unread returns what a drone may see since its inbox position, including what came while it was away", async () => {
    const { cubeId } = await newCube(h, owner.token, "inbox");
    const a = await seat(h, owner.token, cubeId);
    const b = await seat(h, owner.token, cubeId);
    const c = await seat(h, owner.token, cubeId);
    const e1 = await post(h, a.token, cubeId, "one", [b.droneId]);
    await post(h, a.token, cubeId, "not for b", [c.droneId]);
    const e3 = await post(h, a.token, cubeId, "three");
    const r1 = await h.activity.readUnread({ cubeId, pageSize: 1 }, asBearer(b.token));
    expect(entries(r1.items).map((e) => e.id)).toEqual([e1.id]);
    expect(r1.hasMore).toBe(true);
    const r2 = await h.activity.readUnread({ cubeId }, asBearer(b.token));
    expect(entries(r2.items).map((e) => e.id)).toEqual([e3.id]);
    const r3 = await h.activity.readUnread({ cubeId }, asBearer(b.token));
    expect(r3.items).toEqual([]);
    expect(r3.cursor).toBe(r2.cursor);
    await expectStatus(h.activity.readUnread({ cubeId }, asBearer(owner.token)), status.FAILED_PRECONDITION);
  });
});

describe("acks, claims and notifications", () => {
  it("a new ack notifies the author with a folded 200-char preview; repeated acks do not", async () => {
    const { cubeId } = await newCube(h, owner.token, "acks");
    const a = await seat(h, owner.token, cubeId);
    const b = await seat(h, owner.token, cubeId);
    const long = `  hello\n\t  world   ${"x".repeat(300)}  `;
    const e = await post(h, a.token, cubeId, long);
    const results = await Promise.all(
      Array.from({ length: 10 }, () => h.activity.ackEntry({ cubeId, entryId: e.id }, asBearer(b.token))),
    );
    expect(results.filter((r) => r.newlyAcked).length).toBe(1);
    expect(results[0]?.entry?.ackCount).toBe(1);
    expect(results[0]?.entry?.ackedByDroneIds).toEqual([b.droneId]);
    const aNotes = notes(await readAll(a.token, cubeId));
    expect(aNotes.length).toBe(1);
    const expected = `hello world ${"x".repeat(300)}`.slice(0, 200);
    expect(aNotes[0]).toMatchObject({
      kind: NotificationKind.ACK,
      text: `[ACK] ${expected}`,
      entryId: e.id,
      recipientDroneId: a.droneId,
      actorDroneId: b.droneId,
      actorRoleName: "worker",
    });
    // Notifications go only to their recipient.
    expect(notes(await readAll(b.token, cubeId))).toEqual([]);
    expect(notes(await readAll(user, cubeId))).toEqual([]);
    const userAck = await h.activity.ackEntry({ cubeId, entryId: e.id }, asBearer(user));
    expect(userAck.newlyAcked).toBe(true);
    expect(userAck.entry?.ackCount).toBe(2);
    expect(notes(await readAll(a.token, cubeId)).length).toBe(1);
  });

  it("20 drones claiming one entry at once: one holder, one claim notification per audience drone", async () => {
    const { cubeId } = await newCube(h, owner.token, "claims");
    const author = await seat(h, owner.token, cubeId);
    const drones = await Promise.all(Array.from({ length: 20 }, () => seat(h, owner.token, cubeId)));
    const e = await post(h, author.token, cubeId, "who takes this?");
    const results = await Promise.all(
      drones.map((d) => h.activity.claimEntry({ cubeId, entryId: e.id }, asBearer(d.token))),
    );
    const winners = results.filter((r) => r.outcome === ClaimOutcome.CLAIMED);
    expect(winners.length).toBe(1);
    const holder = winners[0]?.claim?.holderDroneId as string;
    expect(results.filter((r) => r.outcome === ClaimOutcome.ALREADY_CLAIMED).length).toBe(19);
    for (const r of results) expect(r.claim?.holderDroneId).toBe(holder);
    const rows = await h.sql<{ recipient: string }>(
      "SELECT recipient_drone_ids[1]::text AS recipient FROM activity_items WHERE cube_id = $1 AND notification_kind = 'claim'",
      [cubeId],
    );
    // The audience of a broadcast: every participant drone except the claimant (21 drones - 1).
    expect(rows.length).toBe(20);
    expect(new Set(rows.map((r) => r.recipient)).size).toBe(20);
    expect(rows.map((r) => r.recipient)).not.toContain(holder);
    const holderToken = drones.find((d) => d.droneId === holder)?.token as string;
    const again = await h.activity.claimEntry({ cubeId, entryId: e.id }, asBearer(holderToken));
    expect(again.outcome).toBe(ClaimOutcome.ALREADY_HELD);
    const authorNote = notes(await readAll(author.token, cubeId));
    expect(authorNote.map((n) => [n.kind, n.text])).toEqual([[NotificationKind.CLAIM, "[CLAIM] who takes this?"]]);
    // Release: only the holder; the audience is told.
    const other = drones.find((d) => d.droneId !== holder)?.token as string;
    const denied = await h.activity.releaseClaim({ cubeId, entryId: e.id }, asBearer(other));
    expect(denied.outcome).toBe(ReleaseOutcome.HELD_BY_OTHER);
    expect(denied.claim?.holderDroneId).toBe(holder);
    const released = await h.activity.releaseClaim({ cubeId, entryId: e.id }, asBearer(holderToken));
    expect(released.outcome).toBe(ReleaseOutcome.RELEASED);
    expect(released.entry?.claim).toBeUndefined();
    const rel = await h.activity.releaseClaim({ cubeId, entryId: e.id }, asBearer(holderToken));
    expect(rel.outcome).toBe(ReleaseOutcome.NOT_CLAIMED);
    const authorNotes = notes(await readAll(author.token, cubeId)).map((n) => n.kind);
    expect(authorNotes).toEqual([NotificationKind.CLAIM, NotificationKind.RELEASE]);
    const next = await h.activity.claimEntry({ cubeId, entryId: e.id }, asBearer(other));
    expect(next.outcome).toBe(ClaimOutcome.CLAIMED);
  });

  it("a direct entry's claim audience is its recipients; observers cannot claim", async () => {
    const { cubeId } = await newCube(h, owner.token, "direct-claims");
    const reader = await newClient(h, user, "reader-c");
    await grant(h, user, reader.id, cubeId, CubeAccess.READ);
    const a = await seat(h, owner.token, cubeId);
    const b = await seat(h, owner.token, cubeId);
    const c = await seat(h, owner.token, cubeId);
    const bystander = await seat(h, owner.token, cubeId);
    const obs = await seat(h, reader.token, cubeId);
    const e = await post(h, a.token, cubeId, "for b and c", [b.droneId, c.droneId]);
    const bc = await post(h, a.token, cubeId, "broadcast");
    await expectStatus(
      h.activity.claimEntry({ cubeId, entryId: bc.id }, asBearer(obs.token)),
      status.PERMISSION_DENIED,
    );
    await h.activity.claimEntry({ cubeId, entryId: e.id }, asBearer(b.token));
    const rows = await h.sql<{ recipient: string }>(
      "SELECT recipient_drone_ids[1]::text AS recipient FROM activity_items WHERE cube_id = $1 AND notification_kind = 'claim'",
      [cubeId],
    );
    expect(rows.map((r) => r.recipient)).toEqual([c.droneId]);
    expect(notes(await readAll(bystander.token, cubeId))).toEqual([]);
  });
});

describe("decisions", () => {
  it("records and lists decisions newest first, validating fields", async () => {
    const { cubeId } = await newCube(h, owner.token, "decisions");
    const a = await seat(h, owner.token, cubeId);
    const e = await post(h, a.token, cubeId, "proposal");
    const d1 = await h.activity.recordDecision({ cubeId, title: "first", rationale: "why" }, asBearer(a.token));
    const d2 = await h.activity.recordDecision(
      { cubeId, title: "second", rationale: "", entryId: e.id },
      asBearer(user),
    );
    expect(d1.decision?.author?.droneId).toBe(a.droneId);
    expect(d2.decision?.entryId).toBe(e.id);
    await expectStatus(
      h.activity.recordDecision({ cubeId, title: "" }, asBearer(a.token)),
      status.INVALID_ARGUMENT,
      "title",
    );
    await expectStatus(
      h.activity.recordDecision({ cubeId, title: "t", rationale: "x".repeat(32_769) }, asBearer(a.token)),
      status.INVALID_ARGUMENT,
      "rationale",
    );
    await expectStatus(
      h.activity.recordDecision({ cubeId, title: "t", entryId: crypto.randomUUID() }, asBearer(a.token)),
      status.NOT_FOUND,
    );
    const list = await h.activity.listDecisions({ cubeId }, asBearer(user));
    expect(list.decisions.map((d) => d.title).sort()).toEqual(["first", "second"]);
  });
});

describe("isolation", () => {
  it("a foreign tenant gets NOT_FOUND for every activity RPC", async () => {
    const { cubeId } = await newCube(h, owner.token, "iso");
    const a = await seat(h, owner.token, cubeId);
    const e = await post(h, a.token, cubeId, "private");
    const b = await newTenant(h, "activity-b");
    const foreign = await newClient(h, b.userToken, "foreign");
    const { cubeId: theirCube } = await newCube(h, foreign.token, "theirs");
    const theirSeat = await seat(h, foreign.token, theirCube);
    for (const token of [b.userToken, foreign.token, theirSeat.token]) {
      const o = asBearer(token);
      await expectStatus(post(h, token, cubeId, "x"), status.NOT_FOUND);
      await expectStatus(h.activity.readActivity({ cubeId }, o), status.NOT_FOUND);
      await expectStatus(h.activity.ackEntry({ cubeId, entryId: e.id }, o), status.NOT_FOUND);
      await expectStatus(h.activity.claimEntry({ cubeId, entryId: e.id }, o), status.NOT_FOUND);
      await expectStatus(h.activity.releaseClaim({ cubeId, entryId: e.id }, o), status.NOT_FOUND);
      await expectStatus(h.activity.recordDecision({ cubeId, title: "x" }, o), status.NOT_FOUND);
      await expectStatus(h.activity.listDecisions({ cubeId }, o), status.NOT_FOUND);
      await expectStatus(
        h.cube.dronesSince({ cubeId, anchor: { case: "sinceEntryId", value: e.id } }, o),
        status.NOT_FOUND,
      );
    }
    await expectStatus(h.activity.readUnread({ cubeId }, asBearer(theirSeat.token)), status.NOT_FOUND);
    // Their own entry id in our cube is not found either.
    const theirs = await post(h, theirSeat.token, theirCube, "theirs");
    await expectStatus(h.activity.ackEntry({ cubeId, entryId: theirs.id }, asBearer(a.token)), status.NOT_FOUND);
  });
});
