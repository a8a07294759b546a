import { COALESCED_KINDS, coalesces } from "../src/rules/coalesce";
import { fenceHolds, type LeaseFacts, staleAtFor, takeOverDecision } from "../src/rules/lease";
import { notificationText } from "../src/rules/preview";
import { answersQuestion } from "../src/rules/questions";
import { isSeatChange, seatStateMessage } from "../src/rules/seat";

const now = new Date("2026-12-01T12:00:00Z");
const later = (s: number) => new Date(now.getTime() + s * 1000);
const claim = (over: Partial<LeaseFacts> = {}): LeaseFacts => ({
  fence: 3n,
  state: "held",
  holderPrincipalId: "drone:a",
  staleAt: later(60),
  ...over,
});

describe("claim lease rules", () => {
  test("a lease is due a lease after its renewal", () => {
    expect(staleAtFor(now, 900)).toEqual(later(900));
  });

  test("take-over: only a STALE claim with the seen fence, held by someone else", () => {
    expect(takeOverDecision(null, "drone:b", 1n)).toBe("not_claimed");
    expect(takeOverDecision(claim({ state: "released" }), "drone:b", 3n)).toBe("not_claimed");
    expect(takeOverDecision(claim({ state: "stale" }), "drone:a", 3n)).toBe("already_held");
    expect(takeOverDecision(claim({ state: "stale" }), "drone:b", 2n)).toBe("fence_moved");
    expect(takeOverDecision(claim({ state: "held" }), "drone:b", 3n)).toBe("not_stale");
    expect(takeOverDecision(claim({ state: "stale" }), "drone:b", 3n)).toBe("take_over");
  });

  test("CheckFence is strict: HELD, exactly the fence, not past due, holder live", () => {
    expect(fenceHolds(claim(), 3n, now, true)).toBe(true);
    expect(fenceHolds(claim(), 2n, now, true)).toBe(false);
    expect(fenceHolds(claim(), 4n, now, true)).toBe(false);
    expect(fenceHolds(claim({ state: "stale" }), 3n, now, true)).toBe(false);
    expect(fenceHolds(claim({ state: "released" }), 3n, now, true)).toBe(false);
    expect(fenceHolds(claim({ staleAt: now }), 3n, now, true)).toBe(false);
    expect(fenceHolds(claim(), 3n, now, false)).toBe(false);
    expect(fenceHolds(null, 1n, now, true)).toBe(false);
  });
});

describe("coalescing", () => {
  test("only ACK and REPLY from an actor drone coalesce, and only with a window", () => {
    expect([...COALESCED_KINDS].sort()).toEqual(["ack", "reply"]);
    expect(coalesces("ack", "d1", 30)).toBe(true);
    expect(coalesces("reply", "d1", 30)).toBe(true);
    expect(coalesces("claim", "d1", 30)).toBe(false);
    expect(coalesces("unread_nudge", "d1", 30)).toBe(false);
    expect(coalesces("ack", undefined, 30)).toBe(false);
    expect(coalesces("ack", "d1", 0)).toBe(false);
  });
});

describe("questions, seat state, notification texts", () => {
  test("a question is answered by a user or a human-seat drone only", () => {
    expect(answersQuestion({ principalKind: "user", humanSeat: false })).toBe(true);
    expect(answersQuestion({ principalKind: "drone-session", humanSeat: true })).toBe(true);
    expect(answersQuestion({ principalKind: "drone-session", humanSeat: false })).toBe(false);
    expect(answersQuestion({ principalKind: "client", humanSeat: false })).toBe(false);
  });

  test("only a different state or note is a change; the entry text names both", () => {
    expect(isSeatChange({ state: null, note: "" }, { state: "idle", note: "" })).toBe(true);
    expect(isSeatChange({ state: "idle", note: "" }, { state: "idle", note: "" })).toBe(false);
    expect(isSeatChange({ state: "waiting", note: "on CI" }, { state: "waiting", note: "on review" })).toBe(true);
    expect(seatStateMessage("waiting", "on CI")).toBe("[STATE] waiting: on CI");
    expect(seatStateMessage("idle", "")).toBe("[STATE] idle");
  });

  test("new notification kinds are tagged", () => {
    expect(notificationText("reply", "ship  it\n")).toBe("[REPLY] ship it");
    expect(notificationText("claim_stale", "x")).toBe("[STALE] x");
    expect(notificationText("takeover", "x")).toBe("[TAKEOVER] x");
    expect(notificationText("unread_nudge", "x")).toBe("[UNREAD] x");
  });
});
