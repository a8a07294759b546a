import { status } from "@grpc/grpc-js";
import {
  BeginRunOutcome,
  EndRunOutcome,
  PlaceSessionOutcome,
  RebindSessionOutcome,
} from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { eventually, expectStatus } from "@unimatrix/service-kit/testing";
import { as, bearer, count, enrolledDevice, type Harness, OPERATOR, startHarness, tenant } from "./harness";

let sessionCounter = 0;
const session = () => {
  sessionCounter += 1;
  return `sess-${Date.now().toString(36)}-${sessionCounter}`;
};

describe("placement, rebind and run claims", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("device_place");
  });
  afterAll(async () => h.close());

  it("places: bound, same, device_conflict, device_not_found (unknown, foreign, other owner), device_revoked", async () => {
    const t = tenant();
    const other = tenant();
    const notes: { type: string; rootSessionId?: string; rev?: string }[] = [];
    const bus = await h.openBus();
    await bus.subscribe(`device:${t.tenantId}`, (m) => notes.push(JSON.parse(m)));
    const a = await enrolledDevice(h, t.client);
    const b = await enrolledDevice(h, t.client);
    const theirs = await enrolledDevice(h, t.client2);
    const foreign = await enrolledDevice(h, other.user);
    const s = session();
    const bound = await h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(t.client));
    expect(bound.outcome).toBe(PlaceSessionOutcome.BOUND);
    expect(bound.placement).toMatchObject({
      rootSessionId: s,
      deviceId: a.id,
      rev: 1n,
      activeRunId: "",
      owner: { tenantId: t.tenantId, subjectId: t.client.subjectId },
    });
    const same = await h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(t.client));
    expect(same.outcome).toBe(PlaceSessionOutcome.SAME);
    expect(same.placement?.rev).toBe(1n);
    const conflict = await h.placement.placeSession({ rootSessionId: s, deviceId: b.id }, as(t.client));
    expect(conflict.outcome).toBe(PlaceSessionOutcome.DEVICE_CONFLICT);
    expect(conflict.placement?.deviceId).toBe(a.id);
    for (const deviceId of [theirs.id, foreign.id, "00000000-0000-4000-8000-000000000000"]) {
      const missing = await h.placement.placeSession({ rootSessionId: session(), deviceId }, as(t.client));
      expect(missing.outcome).toBe(PlaceSessionOutcome.DEVICE_NOT_FOUND);
      expect(missing.placement).toBeUndefined();
    }
    // A USER of the tenant may place on any device of the tenant; the placement belongs to the device's owner.
    const byUser = await h.placement.placeSession({ rootSessionId: session(), deviceId: theirs.id }, as(t.user));
    expect(byUser.outcome).toBe(PlaceSessionOutcome.BOUND);
    expect(byUser.placement?.owner?.subjectId).toBe(t.client2.subjectId);
    await h.devices.revokeDevice({ deviceId: b.id, reason: "retired" }, as(t.client));
    const revokedSession = session();
    const revoked = await h.placement.placeSession({ rootSessionId: revokedSession, deviceId: b.id }, as(t.client));
    expect(revoked.outcome).toBe(PlaceSessionOutcome.DEVICE_REVOKED);
    expect(await count(h, "placements", "root_session_id = $1", [revokedSession])).toBe(0);
    expect(await count(h, "audit_events", "event_type = 'session_placed' AND tenant_id = $1", [t.tenantId])).toBe(2);
    await eventually(() => notes.filter((n) => n.type === "session_placed").length === 2, "two placed notes");
    expect(notes.find((n) => n.type === "session_placed")).toMatchObject({ rootSessionId: s, rev: "1" });
  });

  it("rings the notes of successive placements in commit order (answers do not wait for the bus)", async () => {
    const t = tenant();
    const notes: { type: string; rootSessionId?: string; cursor: string }[] = [];
    const bus = await h.openBus();
    await bus.subscribe(`device:${t.tenantId}`, (m) => notes.push(JSON.parse(m)));
    const a = await enrolledDevice(h, t.client);
    const placed: string[] = [];
    for (let i = 0; i < 20; i += 1) {
      const s = session();
      const r = await h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(t.client));
      expect(r.outcome).toBe(PlaceSessionOutcome.BOUND);
      placed.push(s);
    }
    const placedNotes = () => notes.filter((n) => n.type === "session_placed");
    await eventually(() => placedNotes().length === 20, "twenty placed notes");
    expect(placedNotes().map((n) => n.rootSessionId)).toEqual(placed);
    const cursors = placedNotes().map((n) => BigInt(n.cursor));
    expect(cursors.every((c, i) => i === 0 || c > (cursors[i - 1] ?? 0n))).toBe(true);
  });

  it("gets placements for the owner, the tenant's USER and the device itself; NOT_FOUND for anyone else", async () => {
    const t = tenant();
    const other = tenant();
    const a = await enrolledDevice(h, t.client);
    const b = await enrolledDevice(h, t.client);
    const s = session();
    await h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(t.client));
    for (const caller of [as(t.client), as(t.user), bearer(a.token)]) {
      expect((await h.placement.getPlacement({ rootSessionId: s }, caller)).placement?.deviceId).toBe(a.id);
    }
    await expectStatus(h.placement.getPlacement({ rootSessionId: s }, as(OPERATOR)), status.PERMISSION_DENIED);
    for (const caller of [as(t.client2), as(other.user), bearer(b.token)]) {
      await expectStatus(h.placement.getPlacement({ rootSessionId: s }, caller), status.NOT_FOUND);
    }
    await expectStatus(h.placement.getPlacement({ rootSessionId: session() }, as(t.user)), status.NOT_FOUND);
    await expectStatus(
      h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, bearer(a.token)),
      status.PERMISSION_DENIED,
    );
  });

  it("rebinds: rebound, idempotent retry, rev_conflict with current, gone, device_not_found, device_revoked", async () => {
    const t = tenant();
    const other = tenant();
    const a = await enrolledDevice(h, t.client);
    const b = await enrolledDevice(h, t.client);
    const c = await enrolledDevice(h, t.client);
    const theirs = await enrolledDevice(h, t.client2);
    const foreign = await enrolledDevice(h, other.user);
    const notes: { type: string; rootSessionId?: string; rev?: string; deviceId: string }[] = [];
    const bus = await h.openBus();
    await bus.subscribe(`device:${t.tenantId}`, (m) => notes.push(JSON.parse(m)));
    const s = session();
    await h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(t.client));
    h.clock.advance(1_000);
    const rebound = await h.placement.rebindSession(
      { rootSessionId: s, deviceId: b.id, expectedRev: 1n },
      as(t.client),
    );
    expect(rebound.outcome).toBe(RebindSessionOutcome.REBOUND);
    expect(rebound.previousDeviceId).toBe(a.id);
    expect(rebound.placement).toMatchObject({ deviceId: b.id, rev: 2n });
    const retry = await h.placement.rebindSession({ rootSessionId: s, deviceId: b.id, expectedRev: 1n }, as(t.client));
    expect(retry.outcome).toBe(RebindSessionOutcome.IDEMPOTENT);
    expect(retry.placement).toMatchObject({ deviceId: b.id, rev: 2n });
    expect(retry.previousDeviceId).toBe("");
    const stale = await h.placement.rebindSession({ rootSessionId: s, deviceId: c.id, expectedRev: 1n }, as(t.client));
    expect(stale.outcome).toBe(RebindSessionOutcome.REV_CONFLICT);
    expect(stale.placement).toMatchObject({ deviceId: b.id, rev: 2n });
    const gone = await h.placement.rebindSession(
      { rootSessionId: session(), deviceId: c.id, expectedRev: 1n },
      as(t.client),
    );
    expect(gone.outcome).toBe(RebindSessionOutcome.GONE);
    expect(gone.placement).toBeUndefined();
    const foreignCaller = await h.placement.rebindSession(
      { rootSessionId: s, deviceId: foreign.id, expectedRev: 2n },
      as(other.user),
    );
    expect(foreignCaller.outcome).toBe(RebindSessionOutcome.GONE);
    for (const deviceId of [foreign.id, theirs.id, "00000000-0000-4000-8000-000000000000"]) {
      const missing = await h.placement.rebindSession({ rootSessionId: s, deviceId, expectedRev: 2n }, as(t.client));
      expect(missing.outcome).toBe(RebindSessionOutcome.DEVICE_NOT_FOUND);
    }
    await h.devices.revokeDevice({ deviceId: c.id, reason: "broken" }, as(t.user));
    const revoked = await h.placement.rebindSession(
      { rootSessionId: s, deviceId: c.id, expectedRev: 2n },
      as(t.client),
    );
    expect(revoked.outcome).toBe(RebindSessionOutcome.DEVICE_REVOKED);
    const rows = await h.sql.query<{ detail: { from: string; to: string; rev: string } }>(
      "SELECT detail FROM audit_events WHERE event_type = 'session_rebound' AND root_session_id = $1",
      [s],
    );
    expect(rows).toEqual([{ detail: { from: a.id, to: b.id, rev: "2" } }]);
    const current = await h.placement.getPlacement({ rootSessionId: s }, as(t.client));
    expect(current.placement).toMatchObject({ deviceId: b.id, rev: 2n });
    await eventually(() => notes.some((n) => n.type === "session_rebound"), "rebound note");
    expect(notes.filter((n) => n.type.startsWith("session_")).map((n) => [n.type, n.deviceId, n.rev])).toEqual([
      ["session_placed", a.id, "1"],
      ["session_rebound", b.id, "2"],
    ]);
  });

  it("tracks run claims and refuses a rebind while a run holds the session", async () => {
    const t = tenant();
    const a = await enrolledDevice(h, t.client);
    const b = await enrolledDevice(h, t.client);
    const s = session();
    await h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(t.client));
    const begun = await h.placement.beginRun({ rootSessionId: s, runId: "run-1" }, as(t.client));
    expect(begun.outcome).toBe(BeginRunOutcome.BEGUN);
    expect(begun.placement?.activeRunId).toBe("run-1");
    expect((await h.placement.beginRun({ rootSessionId: s, runId: "run-1" }, as(t.client))).outcome).toBe(
      BeginRunOutcome.ALREADY_ACTIVE,
    );
    const busy = await h.placement.beginRun({ rootSessionId: s, runId: "run-2" }, as(t.client));
    expect(busy.outcome).toBe(BeginRunOutcome.BUSY);
    expect(busy.placement?.activeRunId).toBe("run-1");
    const held = await h.placement.rebindSession({ rootSessionId: s, deviceId: b.id, expectedRev: 1n }, as(t.client));
    expect(held.outcome).toBe(RebindSessionOutcome.ACTIVE_RUN);
    expect(held.placement).toMatchObject({ deviceId: a.id, rev: 1n, activeRunId: "run-1" });
    expect((await h.placement.getPlacement({ rootSessionId: s }, as(t.user))).placement?.activeRunId).toBe("run-1");
    expect((await h.placement.endRun({ rootSessionId: s, runId: "run-2" }, as(t.client))).outcome).toBe(
      EndRunOutcome.OTHER_RUN,
    );
    const ended = await h.placement.endRun({ rootSessionId: s, runId: "run-1" }, as(t.client));
    expect(ended.outcome).toBe(EndRunOutcome.ENDED);
    expect(ended.placement?.activeRunId).toBe("");
    expect((await h.placement.endRun({ rootSessionId: s, runId: "run-1" }, as(t.client))).outcome).toBe(
      EndRunOutcome.NOT_ACTIVE,
    );
    expect((await h.placement.beginRun({ rootSessionId: session(), runId: "r" }, as(t.client))).outcome).toBe(
      BeginRunOutcome.GONE,
    );
    expect((await h.placement.endRun({ rootSessionId: session(), runId: "r" }, as(t.client))).outcome).toBe(
      EndRunOutcome.GONE,
    );
    expect((await h.placement.beginRun({ rootSessionId: s, runId: "r" }, as(t.client2))).outcome).toBe(
      BeginRunOutcome.GONE,
    );
    const moved = await h.placement.rebindSession({ rootSessionId: s, deviceId: b.id, expectedRev: 1n }, as(t.client));
    expect(moved.outcome).toBe(RebindSessionOutcome.REBOUND);
    const audit = await h.sql.query<{ event_type: string }>(
      "SELECT event_type FROM audit_events WHERE root_session_id = $1 ORDER BY seq",
      [s],
    );
    expect(audit.map((r) => r.event_type)).toEqual(["session_placed", "run_began", "run_ended", "session_rebound"]);
  });

  it("refuses malformed ids and revisions naming the field, writing nothing", async () => {
    const t = tenant();
    const a = await enrolledDevice(h, t.client);
    const before = await count(h, "audit_events");
    const cases: [Promise<unknown>, string][] = [
      [h.placement.placeSession({ rootSessionId: "bad id!", deviceId: a.id }, as(t.client)), "root_session_id"],
      [h.placement.placeSession({ rootSessionId: "x".repeat(129), deviceId: a.id }, as(t.client)), "root_session_id"],
      [h.placement.placeSession({ rootSessionId: "", deviceId: a.id }, as(t.client)), "root_session_id"],
      [h.placement.placeSession({ rootSessionId: "ok", deviceId: a.id.toUpperCase() }, as(t.client)), "device_id"],
      [
        h.placement.rebindSession({ rootSessionId: "ok", deviceId: a.id, expectedRev: 0n }, as(t.client)),
        "expected_rev",
      ],
      [h.placement.beginRun({ rootSessionId: "ok", runId: "" }, as(t.client)), "run_id"],
      [h.placement.endRun({ rootSessionId: "ok", runId: "a b" }, as(t.client)), "run_id"],
      [h.placement.getPlacement({ rootSessionId: "ü" }, as(t.client)), "root_session_id"],
    ];
    for (const [call, field] of cases) {
      const error = await expectStatus(call, status.INVALID_ARGUMENT);
      expect(error.message).toMatch(new RegExp(`^${field}:`));
    }
    expect(await count(h, "audit_events")).toBe(before);
    expect(await count(h, "placements", "device_id = $1", [a.id])).toBe(0);
  });

  it("refuses the operator: it manages tenants, not their placements", async () => {
    const t = tenant();
    const a = await enrolledDevice(h, t.client);
    const s = session();
    await expectStatus(
      h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(OPERATOR)),
      status.PERMISSION_DENIED,
    );
    expect(await count(h, "placements", "device_id = $1", [a.id])).toBe(0);
  });

  it("100 concurrent rebinds with the same expected rev: exactly one rebound, rev + 1, one audit row", async () => {
    const t = tenant();
    const a = await enrolledDevice(h, t.client);
    const b = await enrolledDevice(h, t.client);
    const c = await enrolledDevice(h, t.client);
    const s = session();
    await h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(t.client));
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        h.placement.rebindSession({ rootSessionId: s, deviceId: i % 2 ? b.id : c.id, expectedRev: 1n }, as(t.client)),
      ),
    );
    const outcomes = results.map((r) => r.outcome);
    expect(outcomes.filter((o) => o === RebindSessionOutcome.REBOUND)).toHaveLength(1);
    expect(
      outcomes.every((o) =>
        [RebindSessionOutcome.REBOUND, RebindSessionOutcome.REV_CONFLICT, RebindSessionOutcome.IDEMPOTENT].includes(o),
      ),
    ).toBe(true);
    const winner = results.find((r) => r.outcome === RebindSessionOutcome.REBOUND);
    const current = await h.placement.getPlacement({ rootSessionId: s }, as(t.client));
    expect(current.placement).toMatchObject({ rev: 2n, deviceId: winner?.placement?.deviceId });
    for (const r of results.filter((x) => x.outcome === RebindSessionOutcome.IDEMPOTENT)) {
      expect(r.placement?.deviceId).toBe(winner?.placement?.deviceId);
    }
    for (const r of results.filter((x) => x.outcome === RebindSessionOutcome.REV_CONFLICT)) {
      expect(r.placement).toMatchObject({ rev: 2n, deviceId: winner?.placement?.deviceId });
    }
    expect(await count(h, "audit_events", "event_type = 'session_rebound' AND root_session_id = $1", [s])).toBe(1);
  });

  it("50 concurrent first placements on two devices: one device wins, the rest same or device_conflict", async () => {
    const t = tenant();
    const a = await enrolledDevice(h, t.client);
    const b = await enrolledDevice(h, t.client);
    const s = session();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        h.placement.placeSession({ rootSessionId: s, deviceId: i % 2 ? a.id : b.id }, as(t.client)),
      ),
    );
    const bound = results.filter((r) => r.outcome === PlaceSessionOutcome.BOUND);
    expect(bound).toHaveLength(1);
    const winner = bound[0]?.placement?.deviceId;
    for (const [i, r] of results.entries()) {
      const asked = i % 2 ? a.id : b.id;
      if (r.outcome === PlaceSessionOutcome.BOUND) continue;
      expect(r.outcome).toBe(asked === winner ? PlaceSessionOutcome.SAME : PlaceSessionOutcome.DEVICE_CONFLICT);
      expect(r.placement).toMatchObject({ deviceId: winner, rev: 1n });
    }
    expect(await count(h, "placements", "root_session_id = $1", [s])).toBe(1);
    expect(await count(h, "audit_events", "event_type = 'session_placed' AND root_session_id = $1", [s])).toBe(1);
  });

  it("revocation racing placements: nothing that started after the revoke committed is bound", async () => {
    const t = tenant();
    const device = await enrolledDevice(h, t.client);
    const before = Array.from({ length: 30 }, () =>
      h.placement.placeSession({ rootSessionId: session(), deviceId: device.id }, as(t.client)),
    );
    await h.devices.revokeDevice({ deviceId: device.id, reason: "compromised" }, as(t.user));
    const after = await Promise.all(
      Array.from({ length: 30 }, () =>
        h.placement.placeSession({ rootSessionId: session(), deviceId: device.id }, as(t.client)),
      ),
    );
    expect(after.every((r) => r.outcome === PlaceSessionOutcome.DEVICE_REVOKED)).toBe(true);
    const racing = await Promise.all(before);
    expect(
      racing.every((r) => [PlaceSessionOutcome.BOUND, PlaceSessionOutcome.DEVICE_REVOKED].includes(r.outcome)),
    ).toBe(true);
    const boundCount = racing.filter((r) => r.outcome === PlaceSessionOutcome.BOUND).length;
    expect(await count(h, "placements", "device_id = $1", [device.id])).toBe(boundCount);
    // Every placement that did bind committed before the revoke did (audit order is commit order here).
    const late = await h.sql.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM audit_events p, audit_events r
       WHERE p.device_id = $1 AND r.device_id = $1 AND p.event_type = 'session_placed' AND r.event_type = 'device_revoked'
         AND p.seq > r.seq`,
      [device.id],
    );
    expect(late[0]?.n).toBe("0");
  });

  it("a failing audit insert rolls the rebind back: placement and revision unchanged", async () => {
    const t = tenant();
    const a = await enrolledDevice(h, t.client);
    const b = await enrolledDevice(h, t.client);
    const s = session();
    await h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(t.client));
    await h.sql.exec(`
      CREATE FUNCTION fail_rebound_audit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.event_type = 'session_rebound' THEN RAISE EXCEPTION 'injected audit failure'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER fail_rebound_audit BEFORE INSERT ON audit_events
        FOR EACH ROW EXECUTE FUNCTION fail_rebound_audit();`);
    try {
      await expectStatus(
        h.placement.rebindSession({ rootSessionId: s, deviceId: b.id, expectedRev: 1n }, as(t.client)),
        status.INTERNAL,
      );
      const unchanged = await h.placement.getPlacement({ rootSessionId: s }, as(t.client));
      expect(unchanged.placement).toMatchObject({ deviceId: a.id, rev: 1n });
      expect(await count(h, "audit_events", "event_type = 'session_rebound' AND root_session_id = $1", [s])).toBe(0);
    } finally {
      await h.sql.exec("DROP TRIGGER fail_rebound_audit ON audit_events; DROP FUNCTION fail_rebound_audit();");
    }
    const healed = await h.placement.rebindSession({ rootSessionId: s, deviceId: b.id, expectedRev: 1n }, as(t.client));
    expect(healed.outcome).toBe(RebindSessionOutcome.REBOUND);
    expect(healed.placement?.rev).toBe(2n);
  });

  it("a failing audit insert fails a first placement: no placement row is left", async () => {
    const t = tenant();
    const a = await enrolledDevice(h, t.client);
    const s = session();
    await h.sql.exec(`
      CREATE FUNCTION fail_placed_audit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.event_type = 'session_placed' THEN RAISE EXCEPTION 'injected audit failure'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER fail_placed_audit BEFORE INSERT ON audit_events
        FOR EACH ROW EXECUTE FUNCTION fail_placed_audit();`);
    try {
      await expectStatus(h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(t.client)), status.INTERNAL);
      expect(await count(h, "placements", "root_session_id = $1", [s])).toBe(0);
    } finally {
      await h.sql.exec("DROP TRIGGER fail_placed_audit ON audit_events; DROP FUNCTION fail_placed_audit();");
    }
    const placed = await h.placement.placeSession({ rootSessionId: s, deviceId: a.id }, as(t.client));
    expect(placed.outcome).toBe(PlaceSessionOutcome.BOUND);
  });
});
