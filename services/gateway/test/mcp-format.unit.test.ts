import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ActivityItemSchema,
  ClaimState,
  EntrySchema,
  NotificationKind,
  NotificationSchema,
  Visibility,
} from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { claimNote, preview, renderItems, SESSION_REJECTED_TEXT, secondsTime, summaryLine } from "../src/mcp/format";

const ME = "11111111-1111-4111-8111-111111111111";
const PEER = "22222222-2222-4222-8222-222222222222";

describe("MCP compact format", () => {
  it("renders one line per item: position, author, audience, kind, message; notifications name their entry", () => {
    const entry = (n: bigint, fields: Record<string, unknown>) =>
      create(ActivityItemSchema, {
        item: {
          case: "entry",
          value: create(EntrySchema, {
            id: `00000000-0000-4000-8000-00000000000${n}`,
            cursor: `opaque-n`,
            position: n,
            visibility: Visibility.BROADCAST,
            ...fields,
          }),
        },
      });
    const items = [
      entry(1n, { author: { droneId: PEER, label: "worker-2" }, message: "who takes the ledger?", kind: "task" }),
      entry(2n, {
        author: { droneId: PEER, label: "worker-2" },
        message: "yours\nsecond line",
        visibility: Visibility.DIRECT,
        recipientDroneIds: [ME],
        claim: { holderDroneId: ME, fence: 1n, state: ClaimState.HELD },
      }),
      entry(3n, { author: { droneId: ME, label: "worker-1" }, message: "on it", ackCount: 2 }),
      create(ActivityItemSchema, {
        item: {
          case: "notification",
          value: create(NotificationSchema, {
            cursor: `opaque-4n`,
            position: 4n,
            kind: NotificationKind.CLAIM,
            text: "[CLAIM] who takes the ledger?",
            entryId: "00000000-0000-4000-8000-000000000001",
            actorDroneId: PEER,
          }),
        },
      }),
      create(ActivityItemSchema, {
        item: {
          case: "notification",
          value: create(NotificationSchema, {
            cursor: `opaque-5n`,
            position: 5n,
            kind: NotificationKind.HEARTBEAT_PING,
            text: "[PING] still there?",
            actorRoleName: "unimatrix",
          }),
        },
      }),
    ];
    const rendered = renderItems(items, { droneId: ME, labels: new Map([[PEER, "worker-2"]]) });
    expect(rendered.map((r) => r.line)).toEqual([
      "#1 worker-2 → all [task]: who takes the ledger?",
      "#2 worker-2 → you: yours\n  second line [claimed by you, fence 1]",
      "#3 you → all: on it (2 acks)",
      "#4 claim by worker-2 on #1: who takes the ledger?",
      "#5 ping by unimatrix: still there?",
    ]);
    expect(rendered.map((r) => r.data)).toEqual([
      { n: 1 },
      { n: 2 },
      { n: 3 },
      { n: 4, notice: "claim" },
      { n: 5, notice: "ping" },
    ]);
    expect(summaryLine(rendered, false, { decisions: 2 })).toBe(
      "5 unread: 1 direct to you, 1 claim(s), 1 ping(s); 2 new decision(s) (decision_list)",
    );
    expect(summaryLine([], true)).toBe("0+ unread; more: call log_read again");
  });

  it("names a claim's holder by the label cube sent, never an id prefix, even when the viewer has no label map", () => {
    const viewer = { droneId: ME, labels: new Map<string, string>() };
    const held = { holderDroneId: PEER, holderLabel: "worker-2", fence: 3n, state: ClaimState.HELD };
    expect(claimNote(held as never, viewer)).toBe(" [claimed by worker-2, fence 3]");
    expect(claimNote({ ...held, state: ClaimState.STALE } as never, viewer)).toBe(
      " [stale claim of worker-2, fence 3]",
    );
    expect(claimNote({ ...held, holderDroneId: ME } as never, viewer)).toBe(" [claimed by you, fence 3]");
    expect(claimNote(held as never, viewer)).not.toContain(PEER.slice(0, 8));
  });

  it("cuts previews without a space before the ellipsis, shows receipt times to the second, says why a session is rejected", () => {
    expect(preview(`${"a".repeat(78)} bcd`, 80)).toBe(`${"a".repeat(78)}…`);
    expect(preview("short  and\nfolded", 80)).toBe("short and folded");
    expect(secondsTime(timestampFromDate(new Date("2026-12-01T18:01:07.250Z")))).toBe("2026-12-01T18:01:07Z");
    expect(SESSION_REJECTED_TEXT).not.toMatch(/no longer valid/);
    expect(SESSION_REJECTED_TEXT).toMatch(/another client's, cube's, role's or drone's/);
  });
});
