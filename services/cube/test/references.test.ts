import { status } from "@grpc/grpc-js";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { asBearer, collect, expectStatus } from "@unimatrix/service-kit/testing";
import { type Harness, newClient, newCube, newTenant, post, seat, startHarness } from "./harness";

// What the contract carries so that an edge never parses a cursor or resolves a reference itself:
// positions on entries and notifications, `#n` and label references resolved by cube, the
// head cursor of an attach, and the taxonomy's kinds.

let h: Harness;
let owner: { id: string; token: string };
beforeAll(async () => {
  h = await startHarness("cube_references");
  const t = await newTenant(h, "references");
  owner = await newClient(h, t.userToken, "owner");
});
afterAll(async () => {
  await h.close();
});

const count = async () => Number((await h.sql<{ n: string }>("SELECT count(*)::text AS n FROM activity_items"))[0]?.n);

describe("references resolved by cube", () => {
  it("entries and notifications carry their position, the same order their cursors name", async () => {
    const { cubeId } = await newCube(h, owner.token);
    const a = await seat(h, owner.token, cubeId);
    const b = await seat(h, owner.token, cubeId);
    const first = await post(h, a.token, cubeId, "first");
    const second = await post(h, a.token, cubeId, "second");
    expect(second.position).toBe(first.position + 1n);
    await h.activity.ackEntry({ cubeId, entryId: second.id }, asBearer(b.token));
    const read = await h.activity.readActivity({ cubeId, pageSize: 50 }, asBearer(a.token));
    const positions = read.items.map((i) => i.item.value?.position);
    expect(positions).toEqual([first.position, second.position, second.position + 1n]);
    expect(read.items[2]?.item.case).toBe("notification");
  });

  it("AppendEntry takes recipients by label and a reply by #n: one call, the same entry as by ids", async () => {
    const { cubeId } = await newCube(h, owner.token);
    const a = await seat(h, owner.token, cubeId);
    const b = await seat(h, owner.token, cubeId);
    const c = await seat(h, owner.token, cubeId);
    const root = await post(h, a.token, cubeId, "root");
    const reply = await h.activity.appendEntry(
      {
        cubeId,
        message: "to b and c",
        visibility: Visibility.DIRECT,
        recipientDroneIds: [c.droneId],
        recipientLabels: [b.label, c.label],
        replyToPosition: root.position,
      },
      asBearer(a.token),
    );
    expect(reply.entry?.recipientDroneIds).toEqual([c.droneId, b.droneId]);
    expect(reply.entry?.replyToEntryId).toBe(root.id);
    expect(reply.entry?.threadRootEntryId).toBe(root.id);

    const before = await count();
    const direct = (more: Record<string, unknown>) =>
      h.activity.appendEntry(
        { cubeId, message: "m", visibility: Visibility.DIRECT, recipientLabels: [b.label], ...more },
        asBearer(a.token),
      );
    const unknown = await expectStatus(
      direct({ recipientLabels: ["nobody-9"] }),
      status.INVALID_ARGUMENT,
      "recipient_labels",
    );
    expect(unknown.message).toContain("recipient_labels: no live drone labelled nobody-9");
    await expectStatus(direct({ replyToPosition: reply.entry!.position + 50n }), status.NOT_FOUND, "reply_to_position");
    await expectStatus(
      direct({ replyToPosition: root.position, replyToEntryId: root.id }),
      status.INVALID_ARGUMENT,
      "reply_to_entry_id",
    );
    await expectStatus(
      h.activity.appendEntry(
        { cubeId, message: "m", visibility: Visibility.BROADCAST, recipientLabels: [b.label] },
        asBearer(a.token),
      ),
      status.INVALID_ARGUMENT,
      "recipient_labels",
    );
    expect(await count()).toBe(before);
  });

  it("ack, claim, thread, receipts, fences and decisions take entry_position as the caller sees it", async () => {
    const { cubeId } = await newCube(h, owner.token);
    const a = await seat(h, owner.token, cubeId);
    const b = await seat(h, owner.token, cubeId);
    const root = await post(h, a.token, cubeId, "root", [b.droneId]);
    const at = { cubeId, entryPosition: root.position };
    const acked = await h.activity.ackEntry(at, asBearer(b.token));
    expect(acked.entry?.id).toBe(root.id);
    const claimed = await h.activity.claimEntry(at, asBearer(b.token));
    expect(claimed.claim?.fence).toBe(1n);
    expect((await h.activity.checkFence({ ...at, fence: 1n }, asBearer(a.token))).holds).toBe(true);
    expect((await h.activity.renewClaim(at, asBearer(b.token))).claim?.fence).toBe(1n);
    expect((await h.activity.listReceipts(at, asBearer(a.token))).receipts.map((r) => r.droneId)).toEqual([b.droneId]);
    const answer = await post(h, b.token, cubeId, "answer");
    const thread = await h.activity.readThread({ cubeId, entryPosition: root.position }, asBearer(a.token));
    expect(thread.root?.id).toBe(root.id);
    const decision = await h.activity.recordDecision(
      { cubeId, title: "go", entryPosition: root.position },
      asBearer(a.token),
    );
    expect(decision.decision?.entryId).toBe(root.id);
    const since = await h.cube.dronesSince(
      { cubeId, anchor: { case: "sincePosition", value: root.position } },
      asBearer(a.token),
    );
    expect(since.drones.filter((d) => d.seenSince).map((d) => d.id)).toEqual([b.droneId]);
    expect(answer.position).toBeGreaterThan(root.position);

    // A DIRECT entry between a and b is not there for a third drone: NOT_FOUND naming the position field.
    const third = await seat(h, owner.token, cubeId);
    const missing = await expectStatus(h.activity.ackEntry(at, asBearer(third.token)), status.NOT_FOUND);
    expect(missing.message).toContain(`entry_position: no entry #${root.position} visible to you`);
    // A notification's position is no entry.
    await expectStatus(
      h.activity.claimEntry({ cubeId, entryPosition: root.position + 1n }, asBearer(b.token)),
      status.NOT_FOUND,
      "entry_position",
    );
    // Neither, or both: INVALID_ARGUMENT naming entry_id.
    await expectStatus(h.activity.ackEntry({ cubeId }, asBearer(b.token)), status.INVALID_ARGUMENT, "entry_id");
    await expectStatus(
      h.activity.ackEntry({ ...at, entryId: root.id }, asBearer(b.token)),
      status.INVALID_ARGUMENT,
      "entry_id",
    );
  });

  it("AttachSeat answers the head cursor: a stream after it starts with what comes next", async () => {
    const { cubeId } = await newCube(h, owner.token);
    const a = await seat(h, owner.token, cubeId);
    await post(h, a.token, cubeId, "before the seat");
    const attached = await h.cube.attachSeat({ cubeId, hostname: "host" }, asBearer(owner.token));
    expect(attached.headCursor).not.toBe("");
    const stream = h.activity.subscribeActivity(
      { cubeId, after: attached.headCursor },
      asBearer(attached.sessionToken),
    );
    const next = await post(h, a.token, cubeId, "after the seat");
    const events = await collect(stream, (e) => e.event.case === "entry");
    stream.cancel();
    const entries = events.flatMap((e) => (e.event.case === "entry" ? [e.event.value] : []));
    expect(entries.map((e) => e.id)).toEqual([next.id]);
  });

  it("a cube carries its taxonomy's kinds as cube reads them", async () => {
    const { cubeId } = await newCube(h, owner.token);
    const taxonomy = { kinds: ["status", { name: "blocker" }, 3] };
    await h.cube.updateCube({ cubeId, taxonomyJson: JSON.stringify(taxonomy) }, asBearer(owner.token));
    const { cube } = await h.cube.getCube({ cubeId }, asBearer(owner.token));
    expect(cube?.taxonomyKinds).toEqual(["status", "blocker"]);
    const { cube: bare } = await h.cube.getCube(
      { cubeId: (await newCube(h, owner.token)).cubeId },
      asBearer(owner.token),
    );
    expect(bare?.taxonomyKinds).toEqual([]);
  });
});
