import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { status } from "@grpc/grpc-js";
import { AuditEventType } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { expectStatus } from "@unimatrix/service-kit/testing";
import { as, bearer, enrolledDevice, type Harness, OPERATOR, startHarness, tenant } from "./harness";

describe("audit trail", () => {
  let h: Harness;
  const t = tenant();
  const other = tenant();
  let a: Awaited<ReturnType<typeof enrolledDevice>>;
  let b: Awaited<ReturnType<typeof enrolledDevice>>;
  let start: number;
  let middle: number;

  beforeAll(async () => {
    h = await startHarness("device_audit");
    start = h.clock.now().getTime();
    a = await enrolledDevice(h, t.client); // enroll_token_issued, device_enrolled
    h.clock.advance(60_000);
    middle = h.clock.now().getTime();
    b = await enrolledDevice(h, t.client2);
    await h.placement.placeSession({ rootSessionId: "root-1", deviceId: a.id }, as(t.client));
    await h.placement.rebindSession({ rootSessionId: "root-1", deviceId: a.id, expectedRev: 1n }, as(t.client));
    await h.devices.acquireConnection({ deviceId: b.id }, bearer(b.token));
    await enrolledDevice(h, other.user);
  });
  afterAll(async () => h.close());

  it("lists the tenant's events newest first for a USER, with every field filled in", async () => {
    const all = await h.audit.listAuditEvents({}, as(t.user));
    expect(all.events.map((e) => e.eventType)).toEqual([
      AuditEventType.CONNECTION_ACQUIRED,
      AuditEventType.SESSION_PLACED,
      AuditEventType.DEVICE_ENROLLED,
      AuditEventType.ENROLL_TOKEN_ISSUED,
      AuditEventType.DEVICE_ENROLLED,
      AuditEventType.ENROLL_TOKEN_ISSUED,
    ]);
    const placed = all.events[1];
    expect(placed).toMatchObject({
      deviceId: a.id,
      rootSessionId: "root-1",
      actorId: t.client.subjectId,
      owner: { tenantId: t.tenantId, subjectId: t.client.subjectId },
      detailJson: '{"rev":1}',
    });
    expect(all.events.every((e) => e.owner?.tenantId === t.tenantId)).toBe(true);
    expect(all.nextPageToken).toBe("");
  });

  it("shows a CLIENT only what it owns and the operator nothing", async () => {
    const mine = await h.audit.listAuditEvents({}, as(t.client));
    expect(mine.events).toHaveLength(3);
    expect(mine.events.every((e) => e.owner?.subjectId === t.client.subjectId)).toBe(true);
    await expectStatus(h.audit.listAuditEvents({ pageSize: 500 }, as(OPERATOR)), status.PERMISSION_DENIED);
    await expectStatus(h.audit.listAuditEvents({}, bearer(a.token)), status.PERMISSION_DENIED);
  });

  it("filters by device, event types and time range; an unknown or foreign device matches nothing", async () => {
    const byDevice = await h.audit.listAuditEvents({ deviceId: b.id }, as(t.user));
    expect(byDevice.events.map((e) => e.eventType)).toEqual([
      AuditEventType.CONNECTION_ACQUIRED,
      AuditEventType.DEVICE_ENROLLED,
    ]);
    const byType = await h.audit.listAuditEvents(
      { eventTypes: [AuditEventType.DEVICE_ENROLLED, AuditEventType.SESSION_PLACED] },
      as(t.user),
    );
    expect(byType.events.map((e) => e.eventType)).toEqual([
      AuditEventType.SESSION_PLACED,
      AuditEventType.DEVICE_ENROLLED,
      AuditEventType.DEVICE_ENROLLED,
    ]);
    const early = await h.audit.listAuditEvents(
      { startTime: timestampFromMs(start), endTime: timestampFromMs(middle) },
      as(t.user),
    );
    expect(early.events.map((e) => e.eventType)).toEqual([
      AuditEventType.DEVICE_ENROLLED,
      AuditEventType.ENROLL_TOKEN_ISSUED,
    ]);
    const late = await h.audit.listAuditEvents({ startTime: timestampFromMs(middle) }, as(t.user));
    expect(late.events).toHaveLength(4);
    const foreignDevice = await h.audit.listAuditEvents({ deviceId: a.id }, as(other.user));
    expect(foreignDevice.events).toHaveLength(0);
  });

  it("pages with a cursor, and refuses mismatched tokens, bad ranges and UNSPECIFIED types", async () => {
    const seen: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const page = await h.audit.listAuditEvents({ pageSize: 4, pageToken }, as(t.user));
      seen.push(...page.events.map((e) => e.id));
      pageToken = page.nextPageToken;
      pages += 1;
    } while (pageToken !== "");
    const whole = await h.audit.listAuditEvents({}, as(t.user));
    expect(pages).toBe(2);
    expect(seen).toEqual(whole.events.map((e) => e.id));
    const first = await h.audit.listAuditEvents({ pageSize: 1 }, as(t.user));
    const mismatch = await expectStatus(
      h.audit.listAuditEvents({ pageSize: 1, pageToken: first.nextPageToken, deviceId: a.id }, as(t.user)),
      status.INVALID_ARGUMENT,
    );
    expect(mismatch.message).toMatch(/^page_token:/);
    const badRange = await expectStatus(
      h.audit.listAuditEvents({ startTime: timestampFromMs(middle), endTime: timestampFromMs(start) }, as(t.user)),
      status.INVALID_ARGUMENT,
    );
    expect(badRange.message).toMatch(/^end_time:/);
    const unspecified = await expectStatus(
      h.audit.listAuditEvents({ eventTypes: [AuditEventType.UNSPECIFIED] }, as(t.user)),
      status.INVALID_ARGUMENT,
    );
    expect(unspecified.message).toMatch(/^event_types:/);
    expect(
      (await expectStatus(h.audit.listAuditEvents({ deviceId: "zz" }, as(t.user)), status.INVALID_ARGUMENT)).message,
    ).toMatch(/^device_id:/);
  });
});
