import {
  beginRunOutcome,
  conflictOutcome,
  endRunOutcome,
  type RebindFacts,
  rebindOutcome,
} from "../src/rules/placement";
import { CLIENT2, DEVICE, DEVICE2, deviceRow, OTHER_TENANT, placementRow, TENANT, USER } from "./rows";

/** A rebind of root-1 (rev 3, on DEVICE) to DEVICE2 of the same owner, by the tenant's user. */
function facts(over: Partial<RebindFacts> = {}): RebindFacts {
  return {
    scope: { kind: "tenant", tenantId: TENANT, subjectId: USER },
    placement: placementRow(),
    device: deviceRow({ id: DEVICE2 }),
    claim: null,
    deviceId: DEVICE2,
    expectedRev: 3n,
    ...over,
  };
}

describe("rebind outcome", () => {
  it("rebinds when everything holds", () => {
    expect(rebindOutcome(facts())).toBe("rebound");
  });

  it("is GONE when the session is not placed or not visible", () => {
    expect(rebindOutcome(facts({ placement: undefined }))).toBe("gone");
    const stranger = { kind: "owner", tenantId: TENANT, subjectId: CLIENT2 } as const;
    expect(rebindOutcome(facts({ scope: stranger }))).toBe("gone");
  });

  it("is DEVICE_NOT_FOUND for an unknown device, another tenant's, or another owner's", () => {
    expect(rebindOutcome(facts({ device: undefined }))).toBe("device_not_found");
    expect(rebindOutcome(facts({ device: deviceRow({ id: DEVICE2, tenant_id: OTHER_TENANT }) }))).toBe(
      "device_not_found",
    );
    expect(rebindOutcome(facts({ device: deviceRow({ id: DEVICE2, owner_subject_id: CLIENT2 }) }))).toBe(
      "device_not_found",
    );
  });

  it("checks in the contract's order: not found → revoked → idempotent → rev conflict → active run", () => {
    const revoked = deviceRow({ id: DEVICE2, status: "revoked" });
    const everythingWrong = { expectedRev: 1n, claim: "run-1" };
    expect(rebindOutcome(facts({ ...everythingWrong, device: undefined }))).toBe("device_not_found");
    expect(rebindOutcome(facts({ ...everythingWrong, device: revoked }))).toBe("device_revoked");
    // Already on the target device: IDEMPOTENT even with a stale rev and a run.
    expect(rebindOutcome(facts({ ...everythingWrong, device: deviceRow(), deviceId: DEVICE }))).toBe("idempotent");
    expect(rebindOutcome(facts(everythingWrong))).toBe("rev_conflict");
    expect(rebindOutcome(facts({ claim: "run-1" }))).toBe("active_run");
  });
});

describe("run claims", () => {
  it("begins a run only on a free session", () => {
    expect(beginRunOutcome(null, "run-1")).toBe("begun");
    expect(beginRunOutcome("run-1", "run-1")).toBe("already_active");
    expect(beginRunOutcome("run-2", "run-1")).toBe("busy");
  });

  it("ends only the holding run", () => {
    expect(endRunOutcome("run-1", "run-1")).toBe("ended");
    expect(endRunOutcome(null, "run-1")).toBe("not_active");
    expect(endRunOutcome("run-2", "run-1")).toBe("other_run");
  });

  it("answers SAME or DEVICE_CONFLICT to a lost first placement", () => {
    expect(conflictOutcome(placementRow(), DEVICE)).toBe("same");
    expect(conflictOutcome(placementRow(), DEVICE2)).toBe("device_conflict");
  });
});
