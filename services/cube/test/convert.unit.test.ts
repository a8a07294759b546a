import { timestampDate } from "@bufbuild/protobuf/wkt";
import { PrincipalKind } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import { ClaimOutcome, ReleaseOutcome } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { ClaimState, NotificationKind, SeatState, Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { claimOutcomeToWire, entryToWire, eventOf, itemToWire, releaseOutcomeToWire } from "../src/convert";
import { encodeCursor } from "../src/rules/cursor";
import { type ActivityRow, NO_REACTIONS } from "../src/store/rows";

const cubeId = "0f8fad5b-d9cb-469f-a165-70867728950e";
const drone = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
const at = new Date("2026-12-01T10:00:00.123Z");

const row = (over: Partial<ActivityRow>): ActivityRow => ({
  id: "16fd2706-8baf-433b-82eb-8c7fada847da",
  cubeId,
  position: 7n,
  itemType: "entry",
  createdAt: at,
  authorDroneId: drone,
  authorPrincipalId: "client-1",
  authorPrincipalKind: "drone-session",
  authorLabel: "worker-1",
  message: "hello",
  visibility: "broadcast",
  recipientDroneIds: [],
  kind: null,
  notificationKind: null,
  entryId: null,
  actorDroneId: null,
  actorRoleName: null,
  replyToEntryId: null,
  threadRootEntryId: null,
  expectsReply: true,
  question: false,
  answerEntryId: null,
  seatState: null,
  seatStateNote: null,
  replyCount: 0,
  ...over,
});

describe("row → wire", () => {
  test("an entry carries its cursor, author, ack and claim state", () => {
    const claimedAt = new Date("2026-12-01T10:01:00Z");
    const wire = entryToWire({
      row: row({ visibility: "direct", recipientDroneIds: [drone], kind: "plan" }),
      state: {
        ackCount: 2,
        ackedByDroneIds: [drone],
        claim: {
          entryId: "e",
          cubeId,
          holderPrincipalId: drone,
          holderDroneId: drone,
          holderLabel: "worker-1",
          claimedAt,
          fence: 3n,
          state: "stale",
          renewedAt: claimedAt,
          staleAt: at,
        },
        replyCount: 4,
      },
    });
    expect(wire.cursor).toBe(encodeCursor(cubeId, 7n));
    expect(wire.author).toEqual({
      droneId: drone,
      label: "worker-1",
      principalId: "client-1",
      principalKind: PrincipalKind.DRONE_SESSION,
    });
    expect(wire.visibility).toBe(Visibility.DIRECT);
    expect(wire.recipientDroneIds).toEqual([drone]);
    expect(wire.kind).toBe("plan");
    expect(wire.ackCount).toBe(2);
    expect(wire.ackedByDroneIds).toEqual([drone]);
    expect(wire.claim?.holderLabel).toBe("worker-1");
    expect(timestampDate(wire.claim?.claimedAt as never)).toEqual(claimedAt);
    expect(wire.claim?.fence).toBe(3n);
    expect(wire.claim?.state).toBe(ClaimState.STALE);
    expect(timestampDate(wire.claim?.staleAt as never)).toEqual(at);
    expect(wire.replyCount).toBe(4);
    expect(wire.expectsReply).toBe(true);
    expect(timestampDate(wire.createdAt as never)).toEqual(at);
  });

  test("a released claim is not shown; a seat state entry carries its change", () => {
    const claimedAt = new Date("2026-12-01T10:01:00Z");
    const released = {
      entryId: "e",
      cubeId,
      holderPrincipalId: drone,
      holderDroneId: drone,
      holderLabel: "worker-1",
      claimedAt,
      fence: 1n,
      state: "released",
      renewedAt: claimedAt,
      staleAt: claimedAt,
    };
    expect(entryToWire({ row: row({}), state: { ...NO_REACTIONS, claim: released } }).claim).toBeUndefined();
    const seat = entryToWire({ row: row({ seatState: "waiting", seatStateNote: "on CI" }), state: NO_REACTIONS });
    expect(seat.seatState).toEqual({ state: SeatState.WAITING, note: "on CI" });
    expect(entryToWire({ row: row({}), state: NO_REACTIONS }).seatState).toBeUndefined();
  });

  test("an unclaimed entry has no claim; a user's entry has no author drone", () => {
    const wire = entryToWire({ row: row({ authorDroneId: null, authorPrincipalKind: "user" }), state: NO_REACTIONS });
    expect(wire.claim).toBeUndefined();
    expect(wire.author?.droneId).toBe("");
    expect(wire.author?.principalKind).toBe(PrincipalKind.USER);
  });

  test("a notification row becomes a notification item and event, with its kind", () => {
    const note = row({
      itemType: "notification",
      visibility: null,
      message: "[ACK] hello",
      recipientDroneIds: [drone],
      notificationKind: "ack",
      authorDroneId: null,
    });
    const item = itemToWire({ row: note, state: NO_REACTIONS });
    expect(item.item?.case).toBe("notification");
    const value = item.item?.value as { kind: NotificationKind; text: string; recipientDroneId: string };
    expect(value.kind).toBe(NotificationKind.ACK);
    expect(value.text).toBe("[ACK] hello");
    expect(value.recipientDroneId).toBe(drone);
    expect(eventOf({ row: note, state: NO_REACTIONS }).event.case).toBe("notification");
    expect(eventOf({ row: row({}), state: NO_REACTIONS }).event.case).toBe("entry");
  });

  test("claim and release outcomes", () => {
    expect([claimOutcomeToWire("claimed"), claimOutcomeToWire("held"), claimOutcomeToWire("other")]).toEqual([
      ClaimOutcome.CLAIMED,
      ClaimOutcome.ALREADY_HELD,
      ClaimOutcome.ALREADY_CLAIMED,
    ]);
    expect([releaseOutcomeToWire("released"), releaseOutcomeToWire("none"), releaseOutcomeToWire("other")]).toEqual([
      ReleaseOutcome.RELEASED,
      ReleaseOutcome.NOT_CLAIMED,
      ReleaseOutcome.HELD_BY_OTHER,
    ]);
  });
});
