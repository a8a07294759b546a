import { randomUUID } from "node:crypto";
import { machineOf } from "../src/rules/access";
import { noticeChannel } from "../src/rules/channels";
import { NOTICE_KINDS } from "../src/rules/notices";
import { noticeText, PREVIEW_CHARS } from "../src/rules/preview";
import { distinctMachines } from "../src/tables/notices";

describe("notice rules", () => {
  it("a DIRECT entry's text names its author and folds and cuts the message like every preview", () => {
    expect(noticeText({ itemType: "entry", authorLabel: "queen-1", message: "  rebase\n\tonto   main  " })).toBe(
      "[DIRECT] queen-1: rebase onto main",
    );
    const long = noticeText({ itemType: "entry", authorLabel: "q", message: "é".repeat(500) });
    expect(Array.from(long.slice("[DIRECT] q: ".length))).toHaveLength(PREVIEW_CHARS);
  });

  it("a notification's text is its own, folded and cut the same way", () => {
    expect(noticeText({ itemType: "notification", authorLabel: null, message: "[REPLY] I  do" })).toBe("[REPLY] I do");
    expect(
      Array.from(noticeText({ itemType: "notification", authorLabel: null, message: "x".repeat(300) })),
    ).toHaveLength(PREVIEW_CHARS);
  });

  it("queues for exactly the kinds a drone must not miss", () => {
    expect([...NOTICE_KINDS].sort()).toEqual(["claim_stale", "reply", "takeover", "unread_nudge"]);
    for (const kind of ["ack", "claim", "release", "heartbeat_ping"]) expect(NOTICE_KINDS.has(kind)).toBe(false);
  });

  it("rings each machine once, on its own channel", () => {
    const [m1, m2, t] = [randomUUID(), randomUUID(), randomUUID()];
    const rows = [m1, m2, m1].map((machine_id) => ({ tenant_id: t, machine_id }));
    expect(distinctMachines(rows)).toEqual([
      { tenantId: t, machineId: m1 },
      { tenantId: t, machineId: m2 },
    ]);
    expect(noticeChannel(m1)).toBe(`notices:${m1}`);
  });

  it("only a MACHINE principal is a notice caller", () => {
    const tenantId = randomUUID();
    const subjectId = randomUUID();
    expect(machineOf({ kind: "machine", tenantId, subjectId })).toEqual({ tenantId, machineId: subjectId });
    for (const kind of ["user", "client", "device"] as const) {
      expect(() => machineOf({ kind, tenantId, subjectId })).toThrow(/only machine principals/);
    }
    expect(() => machineOf({ kind: "operator", subjectId: "operator", tenantId: null })).toThrow(/only machine/);
  });
});
