import { status } from "@grpc/grpc-js";
import { PrincipalKind } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import { AuditEventType } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DevicePlatform, DeviceStatus } from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { expectStatus } from "@unimatrix/service-kit/testing";
import {
  as,
  bearer,
  count,
  enrolledDevice,
  type Harness,
  ms,
  newPublicKey,
  OPERATOR,
  startHarness,
  tenant,
} from "./harness";

describe("enroll tokens and devices", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("device_enroll");
  });
  afterAll(async () => h.close());

  it("issues a token shown once, stores only SHA-256 digests, with a whole-second expiry", async () => {
    const t = tenant();
    const issued = await h.enrollment.issueEnrollToken({ ttlSeconds: 90, label: "laptop" }, as(t.user));
    expect(issued.token).toMatch(/^umx_enroll_[A-Za-z0-9-]+_[A-Za-z0-9-]+$/);
    const meta = issued.enrollToken;
    expect(meta?.owner).toMatchObject({ tenantId: t.tenantId, subjectId: t.user.subjectId });
    expect(meta?.label).toBe("laptop");
    expect(ms(meta?.expiresAt) - h.clock.now().getTime()).toBe(90_000);
    const rows = await h.sql.query<{ lookup: number; verifier: number; text: string }>(
      "SELECT octet_length(lookup_digest) AS lookup, octet_length(verifier_digest) AS verifier, row_to_json(t)::text AS text FROM enroll_tokens t WHERE id = $1",
      [meta?.id],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.lookup).toBe(32);
    expect(rows[0]?.verifier).toBe(32);
    const secret = issued.token.split("_")[3] ?? "";
    expect(rows[0]?.text).not.toContain(secret);
    expect(
      await count(h, "audit_events", "event_type = 'enroll_token_issued' AND enroll_token_id = $1", [meta?.id]),
    ).toBe(1);
  });

  it("refuses bad token requests with the field named and writes nothing", async () => {
    const t = tenant();
    const before = await count(h, "enroll_tokens");
    const auditBefore = await count(h, "audit_events");
    for (const [request, field] of [
      [{ ttlSeconds: 0 }, "ttl_seconds"],
      [{ ttlSeconds: 604_801 }, "ttl_seconds"],
      [{ ttlSeconds: 60, label: "x".repeat(201) }, "label"],
      [{ ttlSeconds: 60, ownerSubjectId: "not-a-uuid" }, "owner_subject_id"],
    ] as const) {
      const error = await expectStatus(h.enrollment.issueEnrollToken(request, as(t.user)), status.INVALID_ARGUMENT);
      expect(error.message).toMatch(new RegExp(`^${field}:`));
    }
    expect(await count(h, "enroll_tokens")).toBe(before);
    expect(await count(h, "audit_events")).toBe(auditBefore);
  });

  it("lets a USER issue for another subject but not a CLIENT; devices and machines may not issue", async () => {
    const t = tenant();
    // The client is known to the tenant's device records once it has acted here.
    await h.enrollment.issueEnrollToken({ ttlSeconds: 60 }, as(t.client));
    const forOther = await h.enrollment.issueEnrollToken(
      { ttlSeconds: 60, ownerSubjectId: t.client.subjectId },
      as(t.user),
    );
    expect(forOther.enrollToken?.owner?.subjectId).toBe(t.client.subjectId);
    await expectStatus(
      h.enrollment.issueEnrollToken({ ttlSeconds: 60, ownerSubjectId: t.client2.subjectId }, as(t.client)),
      status.NOT_FOUND,
    );
    await expectStatus(
      h.enrollment.issueEnrollToken(
        { ttlSeconds: 60 },
        as({ kind: "machine", tenantId: t.tenantId, subjectId: t.user.subjectId }),
      ),
      status.PERMISSION_DENIED,
    );
    await expectStatus(h.enrollment.issueEnrollToken({ ttlSeconds: 60 }), status.UNAUTHENTICATED);
  });

  it("enrolls once; same-key replay is idempotent with a fresh credential; another key is refused", async () => {
    const t = tenant();
    const issued = await h.enrollment.issueEnrollToken({ ttlSeconds: 600 }, as(t.client));
    const key = newPublicKey();
    const first = await h.devices.enrollDevice({
      enrollToken: issued.token,
      publicKey: key,
      platform: DevicePlatform.MACOS,
      displayName: "studio",
    });
    expect(first.replayed).toBe(false);
    expect(first.device).toMatchObject({
      publicKey: key,
      platform: DevicePlatform.MACOS,
      displayName: "studio",
      status: DeviceStatus.ACTIVE,
      connectionGeneration: 0n,
      online: false,
      rev: 1n,
      owner: { tenantId: t.tenantId, subjectId: t.client.subjectId },
    });
    const replay = await h.devices.enrollDevice({
      enrollToken: issued.token,
      publicKey: key,
      platform: DevicePlatform.MACOS,
    });
    expect(replay.replayed).toBe(true);
    expect(replay.device?.id).toBe(first.device?.id);
    expect(replay.deviceToken).not.toBe(first.deviceToken);
    // The previous credential stops working; the fresh one authenticates.
    await expectStatus(h.devices.authenticate({ token: first.deviceToken }), status.UNAUTHENTICATED);
    const auth = await h.devices.authenticate({ token: replay.deviceToken });
    expect(auth.principal).toMatchObject({
      kind: PrincipalKind.DEVICE,
      tenantId: t.tenantId,
      subjectId: first.device?.id,
    });
    await expectStatus(
      h.devices.enrollDevice({ enrollToken: issued.token, publicKey: newPublicKey(), platform: DevicePlatform.LINUX }),
      status.FAILED_PRECONDITION,
    );
    expect(await count(h, "devices", "tenant_id = $1", [t.tenantId])).toBe(1);
    expect(await count(h, "audit_events", "event_type = 'device_enrolled' AND tenant_id = $1", [t.tenantId])).toBe(1);
    // Consumed tokens are no longer listed; they cannot be revoked.
    const listed = await h.enrollment.listEnrollTokens({}, as(t.client));
    expect(listed.enrollTokens.map((x) => x.id)).not.toContain(issued.enrollToken?.id);
    await expectStatus(
      h.enrollment.revokeEnrollToken({ enrollTokenId: issued.enrollToken?.id ?? "" }, as(t.client)),
      status.FAILED_PRECONDITION,
    );
  });

  it("refuses expired, revoked, unknown and malformed tokens, and a public key already enrolled", async () => {
    const t = tenant();
    const expiring = await h.enrollment.issueEnrollToken({ ttlSeconds: 5 }, as(t.user));
    h.clock.advance(5_000);
    await expectStatus(
      h.devices.enrollDevice({
        enrollToken: expiring.token,
        publicKey: newPublicKey(),
        platform: DevicePlatform.LINUX,
      }),
      status.UNAUTHENTICATED,
    );
    const revokedToken = await h.enrollment.issueEnrollToken({ ttlSeconds: 60 }, as(t.user));
    const revoked = await h.enrollment.revokeEnrollToken(
      { enrollTokenId: revokedToken.enrollToken?.id ?? "" },
      as(t.user),
    );
    expect(revoked.enrollToken?.revokedAt).toBeDefined();
    const again = await h.enrollment.revokeEnrollToken(
      { enrollTokenId: revokedToken.enrollToken?.id ?? "" },
      as(t.user),
    );
    expect(again.enrollToken?.revokedAt).toEqual(revoked.enrollToken?.revokedAt);
    expect(await count(h, "audit_events", "event_type = 'enroll_token_revoked' AND tenant_id = $1", [t.tenantId])).toBe(
      1,
    );
    await expectStatus(
      h.devices.enrollDevice({
        enrollToken: revokedToken.token,
        publicKey: newPublicKey(),
        platform: DevicePlatform.LINUX,
      }),
      status.UNAUTHENTICATED,
    );
    const parts = revokedToken.token.split("_");
    const forged = `umx_enroll_${parts[2]}_${"A".repeat(43)}`;
    for (const token of [forged, "umx_enroll_nope_nope", "garbage", "umx_device_abc_def"]) {
      await expectStatus(
        h.devices.enrollDevice({ enrollToken: token, publicKey: newPublicKey(), platform: DevicePlatform.LINUX }),
        status.UNAUTHENTICATED,
      );
    }
    const taken = await enrolledDevice(h, t.user);
    const takenKey = (await h.devices.getDevice({ deviceId: taken.id }, as(t.user))).device?.publicKey ?? "";
    const fresh = await h.enrollment.issueEnrollToken({ ttlSeconds: 60 }, as(t.user));
    await expectStatus(
      h.devices.enrollDevice({ enrollToken: fresh.token, publicKey: takenKey, platform: DevicePlatform.LINUX }),
      status.ALREADY_EXISTS,
    );
    // The refused enrollment left the token unused.
    const listed = await h.enrollment.listEnrollTokens({}, as(t.user));
    expect(listed.enrollTokens.map((x) => x.id)).toContain(fresh.enrollToken?.id);
    expect(listed.enrollTokens.map((x) => x.id)).not.toContain(expiring.enrollToken?.id);
    expect(listed.enrollTokens.map((x) => x.id)).not.toContain(revokedToken.enrollToken?.id);
  });

  it("refuses bad enroll input (unknown OS, wrong key shape, long name) naming the field, writing nothing", async () => {
    const t = tenant();
    const issued = await h.enrollment.issueEnrollToken({ ttlSeconds: 60 }, as(t.user));
    const before = await count(h, "devices");
    for (const [request, field] of [
      [{ publicKey: newPublicKey(), platform: DevicePlatform.UNSPECIFIED }, "platform"],
      [{ publicKey: newPublicKey(), platform: 42 as DevicePlatform }, "platform"],
      [{ publicKey: "", platform: DevicePlatform.LINUX }, "public_key"],
      [{ publicKey: "k".repeat(129), platform: DevicePlatform.LINUX }, "public_key"],
      [{ publicKey: "has space", platform: DevicePlatform.LINUX }, "public_key"],
      [{ publicKey: newPublicKey(), platform: DevicePlatform.LINUX, displayName: "n".repeat(201) }, "display_name"],
      [{ publicKey: newPublicKey(), platform: DevicePlatform.LINUX, enrollToken: "" }, "enroll_token"],
    ] as const) {
      const error = await expectStatus(
        h.devices.enrollDevice({ enrollToken: issued.token, ...request }),
        status.INVALID_ARGUMENT,
      );
      expect(error.message).toMatch(new RegExp(`^${field}:`));
    }
    expect(await count(h, "devices")).toBe(before);
    const listed = await h.enrollment.listEnrollTokens({}, as(t.user));
    expect(listed.enrollTokens.map((x) => x.id)).toEqual([issued.enrollToken?.id]);
  });

  it("scopes devices by owner: USER sees the tenant, CLIENT its own, DEVICE itself, others NOT_FOUND", async () => {
    const t = tenant();
    const other = tenant();
    const mine = await enrolledDevice(h, t.client);
    const theirs = await enrolledDevice(h, t.client2);
    const foreign = await enrolledDevice(h, other.user);
    expect((await h.devices.getDevice({ deviceId: mine.id }, as(t.user))).device?.id).toBe(mine.id);
    expect((await h.devices.getDevice({ deviceId: mine.id }, as(t.client))).device?.id).toBe(mine.id);
    expect((await h.devices.getDevice({ deviceId: mine.id }, bearer(mine.token))).device?.id).toBe(mine.id);
    await expectStatus(h.devices.getDevice({ deviceId: theirs.id }, as(t.client)), status.NOT_FOUND);
    await expectStatus(h.devices.getDevice({ deviceId: foreign.id }, as(t.user)), status.NOT_FOUND);
    await expectStatus(h.devices.getDevice({ deviceId: theirs.id }, bearer(mine.token)), status.NOT_FOUND);
    await expectStatus(h.devices.getDevice({ deviceId: "nope" }, as(t.user)), status.INVALID_ARGUMENT);
    const userList = await h.devices.listDevices({}, as(t.user));
    expect(userList.devices.map((d) => d.id).sort()).toEqual([mine.id, theirs.id].sort());
    const clientList = await h.devices.listDevices({}, as(t.client));
    expect(clientList.devices.map((d) => d.id)).toEqual([mine.id]);
    const deviceList = await h.devices.listDevices({}, bearer(mine.token));
    expect(deviceList.devices.map((d) => d.id)).toEqual([mine.id]);
    await expectStatus(h.devices.getDevice({ deviceId: foreign.id }, as(OPERATOR)), status.PERMISSION_DENIED);
  });

  it("pages devices newest first with a cursor and refuses a token used with other filters", async () => {
    const t = tenant();
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      ids.push((await enrolledDevice(h, t.user)).id);
      h.clock.advance(1_000);
    }
    const seen: string[] = [];
    let pageToken = "";
    do {
      const page = await h.devices.listDevices({ pageSize: 2, pageToken }, as(t.user));
      expect(page.devices.length).toBeLessThanOrEqual(2);
      seen.push(...page.devices.map((d) => d.id));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    expect(seen).toEqual([...ids].reverse());
    const first = await h.devices.listDevices({ pageSize: 2 }, as(t.user));
    const mismatched = await expectStatus(
      h.devices.listDevices({ pageSize: 2, pageToken: first.nextPageToken, status: DeviceStatus.REVOKED }, as(t.user)),
      status.INVALID_ARGUMENT,
    );
    expect(mismatched.message).toMatch(/^page_token:/);
    await expectStatus(h.devices.listDevices({ pageToken: "%%%" }, as(t.user)), status.INVALID_ARGUMENT);
    expect(
      (await expectStatus(h.devices.listDevices({ pageSize: -1 }, as(t.user)), status.INVALID_ARGUMENT)).message,
    ).toMatch(/^page_size:/);
  });

  it("revokes a device with a reason: idempotent, credential dead, status filter, audited once", async () => {
    const t = tenant();
    const device = await enrolledDevice(h, t.client);
    expect(
      (
        await expectStatus(
          h.devices.revokeDevice({ deviceId: device.id, reason: "  " }, as(t.client)),
          status.INVALID_ARGUMENT,
        )
      ).message,
    ).toMatch(/^reason:/);
    const outsider = tenant();
    await expectStatus(
      h.devices.revokeDevice({ deviceId: device.id, reason: "x" }, as(outsider.user)),
      status.NOT_FOUND,
    );
    const revoked = await h.devices.revokeDevice({ deviceId: device.id, reason: "lost laptop" }, as(t.client));
    expect(revoked.device).toMatchObject({
      status: DeviceStatus.REVOKED,
      revokedReason: "lost laptop",
      connectionGeneration: 1n,
    });
    const again = await h.devices.revokeDevice({ deviceId: device.id, reason: "second reason" }, as(t.user));
    expect(again.device?.revokedReason).toBe("lost laptop");
    expect(await count(h, "audit_events", "event_type = 'device_revoked' AND device_id = $1", [device.id])).toBe(1);
    await expectStatus(h.devices.authenticate({ token: device.token }), status.UNAUTHENTICATED);
    await expectStatus(h.devices.getDevice({ deviceId: device.id }, bearer(device.token)), status.UNAUTHENTICATED);
    const active = await h.devices.listDevices({ status: DeviceStatus.ACTIVE }, as(t.user));
    expect(active.devices).toHaveLength(0);
    const revokedList = await h.devices.listDevices({ status: DeviceStatus.REVOKED }, as(t.user));
    expect(revokedList.devices.map((d) => d.id)).toEqual([device.id]);
  });

  it("authenticates device credentials and refuses empty, malformed, other-kind tokens", async () => {
    await expectStatus(h.devices.authenticate({ token: "" }), status.INVALID_ARGUMENT);
    await expectStatus(h.devices.authenticate({ token: "umx_device_x_y" }), status.UNAUTHENTICATED);
    await expectStatus(h.devices.authenticate({ token: "umx_client_x_y" }), status.UNAUTHENTICATED);
    await expectStatus(h.devices.listDevices({}, bearer("umx_device_x_y")), status.UNAUTHENTICATED);
  });

  it("lists and pages unused tokens per owner and audits issue/revoke for the owner", async () => {
    const t = tenant();
    const ids: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      ids.push((await h.enrollment.issueEnrollToken({ ttlSeconds: 600 }, as(t.client))).enrollToken?.id ?? "");
      h.clock.advance(1_000);
    }
    await h.enrollment.issueEnrollToken({ ttlSeconds: 600 }, as(t.client2));
    const page1 = await h.enrollment.listEnrollTokens({ pageSize: 2 }, as(t.client));
    const page2 = await h.enrollment.listEnrollTokens({ pageSize: 2, pageToken: page1.nextPageToken }, as(t.client));
    expect([...page1.enrollTokens, ...page2.enrollTokens].map((x) => x.id)).toEqual([...ids].reverse());
    expect(page2.nextPageToken).toBe("");
    const userList = await h.enrollment.listEnrollTokens({}, as(t.user));
    expect(userList.enrollTokens).toHaveLength(4);
    const events = await h.audit.listAuditEvents({ eventTypes: [AuditEventType.ENROLL_TOKEN_ISSUED] }, as(t.client));
    expect(events.events.map((e) => e.enrollTokenId)).toEqual([...ids].reverse());
  });
});
