import type { Drone, Entry, Question } from "../web/src/api";
import {
  applySeatChange,
  claimView,
  countReply,
  mayListReceipts,
  openQuestions,
  preview,
  questionCountText,
  receiptView,
  repliesText,
  replyPlan,
  seatChangeText,
  seatStateView,
  threadOf,
  touchesQuestions,
} from "../web/src/coordination";
import { ago } from "../web/src/dom";

const CUBE = "0b7c1e2a-1111-4c5c-9d6e-7f8091a2b3c4";
const ASKER = "a0000000-0000-4000-8000-000000000001";
const HUMAN = "a0000000-0000-4000-8000-000000000002";
const OTHER = "a0000000-0000-4000-8000-000000000003";
const GONE = "a0000000-0000-4000-8000-000000000004";
const drones: Drone[] = [
  { id: ASKER, label: "worker-1" },
  { id: HUMAN, label: "operator-1" },
  { id: OTHER, label: "worker-2" },
  { id: GONE, label: "worker-3", evictedAt: "2026-12-01T10:00:00Z" },
];
const label = (id: string | undefined) => drones.find((d) => d.id === id)?.label ?? "someone";

/** The console's rules for issue 16 (threads, questions, receipts, claims, seat state), in process. */
describe("console: coordination rules", () => {
  it("shows a seat state apart from liveness, and applies a state change from the stream", () => {
    expect(seatStateView({})).toBeUndefined();
    expect(seatStateView({ state: "SEAT_STATE_UNSPECIFIED" })).toBeUndefined();
    expect(
      seatStateView({ state: "SEAT_STATE_WAITING", stateNote: "on CI run 88", stateChangedAt: "2026-12-01T10:00:00Z" }),
    ).toEqual({ state: "waiting", note: "on CI run 88", changedAt: "2026-12-01T10:00:00Z" });
    expect(seatStateView({ state: "SEAT_STATE_BLOCKED" })).toEqual({
      state: "blocked",
      note: "",
      changedAt: undefined,
    });
    expect(seatChangeText({ state: "SEAT_STATE_WAITING", note: "on review" })).toBe("now waiting: on review");
    expect(seatChangeText({ state: "SEAT_STATE_IDLE" })).toBe("now idle");

    const change: Entry = {
      id: "e1",
      author: { droneId: ASKER },
      createdAt: "2026-12-01T11:00:00Z",
      seatState: { state: "SEAT_STATE_BLOCKED", note: "needs a key" },
    };
    const after = applySeatChange(drones, change);
    expect(after.find((d) => d.id === ASKER)).toEqual({
      id: ASKER,
      label: "worker-1",
      state: "SEAT_STATE_BLOCKED",
      stateNote: "needs a key",
      stateChangedAt: "2026-12-01T11:00:00Z",
    });
    expect(after.filter((d) => d.state !== undefined)).toHaveLength(1);
    // An entry that is no state change leaves the list alone (and the input is never mutated).
    expect(applySeatChange(drones, { id: "e2", author: { droneId: ASKER } })).toEqual(drones);
    expect(drones[0]?.state).toBeUndefined();
  });

  it("shows a claim's holder, fence and state, and hides a released one", () => {
    expect(claimView(undefined, label)).toBeUndefined();
    expect(claimView({}, label)).toBeUndefined();
    expect(claimView({ holderDroneId: ASKER, fence: "3", state: "CLAIM_STATE_RELEASED" }, label)).toBeUndefined();
    expect(
      claimView(
        { holderDroneId: ASKER, fence: "2", state: "CLAIM_STATE_HELD", staleAt: "2026-12-01T12:15:00Z" },
        label,
      ),
    ).toEqual({
      holder: "worker-1",
      fence: "2",
      state: "held",
      staleAt: "2026-12-01T12:15:00Z",
      text: "held by worker-1 · fence 2",
    });
    expect(
      claimView({ holderDroneId: ASKER, holderLabel: "w1", fence: "7", state: "CLAIM_STATE_STALE" }, label)?.text,
    ).toBe("stale by w1 · fence 7");
    // A claim from before leases (no state, no fence) is shown as held.
    expect(claimView({ holderPrincipalId: "p", holderLabel: "admin" }, label)?.text).toBe("held by admin");
  });

  it("reduces a receipt to its furthest step, and only the author's seat or a non-seat viewer lists them", () => {
    const base = { droneId: ASKER, label: "worker-1" };
    expect(receiptView(base).status).toBe("pending");
    expect(receiptView(base).via).toBe("");
    const delivered = { ...base, deliveredAt: "2026-12-01T10:00:00Z", deliveredVia: "DELIVERY_CHANNEL_MACHINE_LINK" };
    expect(receiptView(delivered)).toMatchObject({ status: "delivered", via: "machine link" });
    expect(receiptView({ ...delivered, readAt: "2026-12-01T10:00:01Z" }).status).toBe("read");
    expect(receiptView({ ...delivered, readAt: "2026-12-01T10:00:01Z", ackedAt: "2026-12-01T10:00:02Z" }).status).toBe(
      "acked",
    );
    expect(receiptView({ droneId: OTHER }).label).toBe(OTHER.slice(0, 8));

    const direct: Entry = { id: "e", visibility: "VISIBILITY_DIRECT", author: { droneId: ASKER } };
    expect(mayListReceipts(direct, undefined)).toBe(true);
    expect(mayListReceipts(direct, ASKER)).toBe(true);
    expect(mayListReceipts(direct, HUMAN)).toBe(false);
    expect(mayListReceipts({ ...direct, visibility: "VISIBILITY_BROADCAST" }, undefined)).toBe(false);
  });

  it("answers a reply to the audience of the entry it replies to", () => {
    const question: Entry = {
      id: "q1",
      visibility: "VISIBILITY_DIRECT",
      author: { droneId: ASKER },
      recipientDroneIds: [HUMAN, GONE],
      question: true,
    };
    // The human seat answers: directly to the asker; itself and the evicted drone are left out.
    expect(replyPlan(CUBE, question, "use main", HUMAN, drones)).toEqual({
      body: {
        cubeId: CUBE,
        message: "use main",
        replyToEntryId: "q1",
        visibility: "VISIBILITY_DIRECT",
        recipientDroneIds: [ASKER],
      },
      audience: "worker-1 (direct)",
    });
    // A user (no seat) answers to the asker and the question's other live recipients.
    expect(replyPlan(CUBE, question, "use main", undefined, drones).body.recipientDroneIds).toEqual([ASKER, HUMAN]);
    // A broadcast is answered to everyone.
    expect(replyPlan(CUBE, { ...question, visibility: "VISIBILITY_BROADCAST" }, "ok", HUMAN, drones)).toEqual({
      body: {
        cubeId: CUBE,
        message: "ok",
        replyToEntryId: "q1",
        visibility: "VISIBILITY_BROADCAST",
        recipientDroneIds: [],
      },
      audience: "everyone",
    });
    // A user's direct post answered by its only recipient: nobody is left to address directly.
    const fromUser: Entry = {
      id: "u1",
      visibility: "VISIBILITY_DIRECT",
      author: { principalId: "u" },
      recipientDroneIds: [HUMAN],
    };
    expect(replyPlan(CUBE, fromUser, "seen", HUMAN, drones).body.visibility).toBe("VISIBILITY_BROADCAST");
  });

  it("places entries in threads and counts a reply new on the stream into its root", () => {
    expect(threadOf({ id: "a" })).toBeUndefined();
    expect(threadOf({ id: "a", replyCount: 2 })).toBe("a");
    expect(threadOf({ id: "b", threadRootEntryId: "a" })).toBe("a");
    const entries = new Map<string, Entry>([["a", { id: "a", replyCount: 1 }]]);
    expect(countReply(entries, { id: "c", replyToEntryId: "b", threadRootEntryId: "a" })).toEqual({
      id: "a",
      replyCount: 2,
    });
    expect(countReply(entries, { id: "c", replyToEntryId: "a" })).toEqual({ id: "a", replyCount: 2 });
    expect(countReply(entries, { id: "d" })).toBeUndefined();
    expect(countReply(entries, { id: "e", threadRootEntryId: "unknown" })).toBeUndefined();
    expect(repliesText(1)).toBe("1 reply");
    expect(repliesText(4)).toBe("4 replies");
  });

  it("keeps open questions newest first, drops answered ones, and knows which entries touch them", () => {
    const q = (id: string, at: string, answered = false): Question => ({
      entry: { id, createdAt: at, question: true },
      ...(answered ? { answer: { id: `${id}-a` } } : {}),
    });
    const list = [
      q("old", "2026-12-01T09:00:00Z"),
      q("new", "2026-12-01T11:00:00Z"),
      q("done", "2026-12-01T10:00:00Z", true),
      q("old", "2026-12-01T09:00:00Z"),
    ];
    const open = openQuestions(list);
    expect(open.map((x) => x.entry.id)).toEqual(["new", "old"]);
    expect(touchesQuestions({ id: "x", question: true }, open)).toBe(true);
    expect(touchesQuestions({ id: "x", replyToEntryId: "old" }, open)).toBe(true);
    expect(touchesQuestions({ id: "x", replyToEntryId: "r", threadRootEntryId: "new" }, open)).toBe(true);
    expect(touchesQuestions({ id: "x", replyToEntryId: "done" }, open)).toBe(false);
    expect(touchesQuestions({ id: "x" }, open)).toBe(false);
    expect(questionCountText(0)).toBe("0 open questions");
    expect(questionCountText(1)).toBe("1 open question");
    expect(questionCountText(3)).toBe("3 open questions");
    expect(questionCountText(50, true)).toBe("50+ open questions");
  });

  it("previews a message on one line and reads future instants", () => {
    expect(preview("  which   branch\n\tdo I use? ")).toBe("which branch do I use?");
    expect(preview("x".repeat(100), 10)).toBe(`${"x".repeat(9)}…`);
    const now = Date.parse("2026-12-01T12:00:00Z");
    expect(ago("2026-12-01T12:14:30Z", now)).toBe("in 14 min");
    expect(ago("2026-12-01T12:00:40Z", now)).toBe("in 40 s");
    expect(ago("2026-12-01T14:00:00Z", now)).toBe("in 2 h");
    expect(ago("2026-12-01T12:00:05Z", now)).toBe("just now");
    expect(ago("2026-12-01T11:55:00Z", now)).toBe("5 min ago");
  });
});
