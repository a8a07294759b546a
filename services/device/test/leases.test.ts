import { status } from "@grpc/grpc-js";
import type { Bus } from "@unimatrix/service-kit/bus";
import { eventually, expectStatus } from "@unimatrix/service-kit/testing";
import { as, bearer, count, enrolledDevice, type Harness, ms, OPERATOR, startHarness, tenant } from "./harness";

interface Note {
  type: string;
  cursor: string;
  deviceId: string;
  generation?: string;
}

describe("connection leases", () => {
  let h: Harness;
  let bus: Bus;
  beforeAll(async () => {
    h = await startHarness("device_lease", 30);
    bus = await h.openBus();
  });
  afterAll(async () => h.close());

  async function listen(tenantId: string): Promise<Note[]> {
    const notes: Note[] = [];
    await bus.subscribe(`device:${tenantId}`, (message) => notes.push(JSON.parse(message) as Note));
    return notes;
  }

  it("acquires, heartbeats, fences and releases by generation, publishing online/offline after commit", async () => {
    const t = tenant();
    const notes = await listen(t.tenantId);
    const device = await enrolledDevice(h, t.client);
    const auth = bearer(device.token);
    const first = await h.devices.acquireConnection({ deviceId: device.id }, auth);
    expect(first.generation).toBe(1n);
    expect(first.heartbeatIntervalSeconds).toBe(10);
    expect(ms(first.leaseExpiresAt)).toBe(h.clock.now().getTime() + 30_000);
    const online = await h.devices.getDevice({ deviceId: device.id }, as(t.user));
    expect(online.device).toMatchObject({ online: true, connectionGeneration: 1n });

    h.clock.advance(10_000);
    const beat = await h.devices.heartbeatConnection({ deviceId: device.id, generation: 1n }, auth);
    expect(beat.ok).toBe(true);
    expect(ms(beat.leaseExpiresAt)).toBe(h.clock.now().getTime() + 30_000);

    const second = await h.devices.acquireConnection({ deviceId: device.id }, auth);
    expect(second.generation).toBe(2n);
    const staleBeat = await h.devices.heartbeatConnection({ deviceId: device.id, generation: 1n }, auth);
    expect(staleBeat.ok).toBe(false);
    expect(staleBeat.leaseExpiresAt).toBeUndefined();
    expect((await h.devices.releaseConnection({ deviceId: device.id, generation: 1n }, auth)).ok).toBe(false);
    expect((await h.devices.heartbeatConnection({ deviceId: device.id, generation: 2n }, auth)).ok).toBe(true);
    expect((await h.devices.releaseConnection({ deviceId: device.id, generation: 2n }, auth)).ok).toBe(true);
    expect((await h.devices.heartbeatConnection({ deviceId: device.id, generation: 2n }, auth)).ok).toBe(false);
    expect((await h.devices.releaseConnection({ deviceId: device.id, generation: 2n }, auth)).ok).toBe(false);
    const offline = await h.devices.getDevice({ deviceId: device.id }, as(t.user));
    expect(offline.device).toMatchObject({ online: false, connectionGeneration: 2n });
    expect(offline.device?.leaseExpiresAt).toBeUndefined();

    const audit = await h.sql.query<{ event_type: string }>(
      "SELECT event_type FROM audit_events WHERE device_id = $1 AND event_type LIKE 'connection_%' ORDER BY seq",
      [device.id],
    );
    expect(audit.map((r) => r.event_type)).toEqual([
      "connection_acquired",
      "connection_fenced",
      "connection_acquired",
      "connection_released",
    ]);
    await eventually(() => notes.filter((n) => n.type !== "device_enrolled").length >= 2, "online and offline notes");
    const transitions = notes.filter((n) => n.type !== "device_enrolled");
    expect(transitions.map((n) => [n.type, n.generation])).toEqual([
      ["device_online", "1"],
      ["device_offline", "2"],
    ]);
    expect(BigInt(transitions[0]?.cursor ?? 0) < BigInt(transitions[1]?.cursor ?? 0)).toBe(true);
  });

  it("lets only the device itself hold its lease (not the operator)", async () => {
    const t = tenant();
    const device = await enrolledDevice(h, t.client);
    const other = await enrolledDevice(h, t.client);
    await expectStatus(h.devices.acquireConnection({ deviceId: device.id }, as(t.client)), status.PERMISSION_DENIED);
    await expectStatus(h.devices.acquireConnection({ deviceId: other.id }, bearer(device.token)), status.NOT_FOUND);
    await expectStatus(
      h.devices.heartbeatConnection({ deviceId: other.id, generation: 1n }, bearer(device.token)),
      status.NOT_FOUND,
    );
    expect(
      (
        await expectStatus(
          h.devices.acquireConnection({ deviceId: "x" }, bearer(device.token)),
          status.INVALID_ARGUMENT,
        )
      ).message,
    ).toMatch(/^device_id:/);
    await expectStatus(h.devices.acquireConnection({ deviceId: device.id }, as(OPERATOR)), status.PERMISSION_DENIED);
    expect((await h.devices.acquireConnection({ deviceId: device.id }, bearer(device.token))).generation).toBe(1n);
  });

  it("expires a lease: heartbeats after expiry are stale, the sweep turns it offline once and says so", async () => {
    const t = tenant();
    const notes = await listen(t.tenantId);
    const device = await enrolledDevice(h, t.client);
    const auth = bearer(device.token);
    const { generation } = await h.devices.acquireConnection({ deviceId: device.id }, auth);
    h.clock.advance(30_000);
    expect((await h.devices.heartbeatConnection({ deviceId: device.id, generation }, auth)).ok).toBe(false);
    expect((await h.devices.getDevice({ deviceId: device.id }, auth)).device?.online).toBe(false);
    expect(await h.service.sweepLeases()).toBeGreaterThanOrEqual(1);
    expect(await h.service.sweepLeases()).toBe(0);
    expect(await count(h, "audit_events", "event_type = 'connection_expired' AND device_id = $1", [device.id])).toBe(1);
    await eventually(() => notes.some((n) => n.type === "device_offline"), "offline note");
    expect(notes.filter((n) => n.type !== "device_enrolled").map((n) => n.type)).toEqual([
      "device_online",
      "device_offline",
    ]);
    // Re-acquiring after expiry starts a new generation and goes online again.
    const again = await h.devices.acquireConnection({ deviceId: device.id }, auth);
    expect(again.generation).toBe(generation + 1n);
    await eventually(() => notes.filter((n) => n.type === "device_online").length === 2, "second online note");
    expect(await count(h, "audit_events", "event_type = 'connection_fenced' AND device_id = $1", [device.id])).toBe(0);
  });

  it("fences the connection of a revoked device and publishes offline then revoked", async () => {
    const t = tenant();
    const notes = await listen(t.tenantId);
    const device = await enrolledDevice(h, t.client);
    const { generation } = await h.devices.acquireConnection({ deviceId: device.id }, bearer(device.token));
    const revoked = await h.devices.revokeDevice({ deviceId: device.id, reason: "stolen" }, as(t.user));
    expect(revoked.device).toMatchObject({ online: false, connectionGeneration: generation + 1n });
    await expectStatus(
      h.devices.heartbeatConnection({ deviceId: device.id, generation }, as(OPERATOR)),
      status.PERMISSION_DENIED,
    );
    await expectStatus(h.devices.acquireConnection({ deviceId: device.id }, as(OPERATOR)), status.PERMISSION_DENIED);
    await expectStatus(
      h.devices.heartbeatConnection({ deviceId: device.id, generation }, bearer(device.token)),
      status.UNAUTHENTICATED,
    );
    expect(await count(h, "audit_events", "event_type = 'connection_fenced' AND device_id = $1", [device.id])).toBe(1);
    await eventually(() => notes.some((n) => n.type === "device_revoked"), "revoked note");
    expect(notes.filter((n) => n.type !== "device_enrolled").map((n) => n.type)).toEqual([
      "device_online",
      "device_offline",
      "device_revoked",
    ]);
  });

  it("under racing acquires and heartbeats, every stale generation is fenced and exactly the newest holds", async () => {
    const t = tenant();
    const device = await enrolledDevice(h, t.client);
    const auth = bearer(device.token);
    let current = (await h.devices.acquireConnection({ deviceId: device.id }, auth)).generation;
    for (let round = 0; round < 5; round += 1) {
      const acquires = Array.from({ length: 8 }, () => h.devices.acquireConnection({ deviceId: device.id }, auth));
      const beats = Array.from({ length: 24 }, () =>
        h.devices.heartbeatConnection({ deviceId: device.id, generation: current }, auth),
      );
      const [acquired, beaten] = await Promise.all([Promise.all(acquires), Promise.all(beats)]);
      const generations = acquired.map((a) => a.generation).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      expect(generations).toEqual(Array.from({ length: 8 }, (_, i) => current + BigInt(i + 1)));
      const newest = generations[7] ?? 0n;
      // Every generation but the newest is fenced, including the one the racing heartbeats named.
      for (const stale of [current, ...generations.slice(0, 7)]) {
        expect((await h.devices.heartbeatConnection({ deviceId: device.id, generation: stale }, auth)).ok).toBe(false);
      }
      expect((await h.devices.heartbeatConnection({ deviceId: device.id, generation: newest }, auth)).ok).toBe(true);
      // A heartbeat that said ok ran while its generation was current: it never moved the lease of a newer one.
      expect(beaten.every((b) => (b.ok ? b.leaseExpiresAt !== undefined : b.leaseExpiresAt === undefined))).toBe(true);
      current = newest;
    }
    const rows = await h.sql.query<{ g: string }>(
      "SELECT connection_generation::text AS g FROM devices WHERE id = $1",
      [device.id],
    );
    expect(rows[0]?.g).toBe(current.toString());
    expect(await count(h, "audit_events", "event_type = 'connection_acquired' AND device_id = $1", [device.id])).toBe(
      41,
    );
    expect(await count(h, "audit_events", "event_type = 'connection_fenced' AND device_id = $1", [device.id])).toBe(40);
  });

  it("runs the sweep on its timer: an expired lease goes offline without anyone asking", async () => {
    const timed = await startHarness("device_sweep", 5, 20);
    try {
      const t = tenant();
      const device = await enrolledDevice(timed, t.client);
      await timed.devices.acquireConnection({ deviceId: device.id }, bearer(device.token));
      const expired = () =>
        count(timed, "audit_events", "event_type = 'connection_expired' AND device_id = $1", [device.id]);
      expect(await expired()).toBe(0);
      timed.clock.advance(5_000);
      await eventually(async () => (await expired()) === 1, "the timed sweep to expire the lease");
      const rows = await timed.sql.query<{ online: boolean }>("SELECT online FROM devices WHERE id = $1", [device.id]);
      expect(rows[0]?.online).toBe(false);
    } finally {
      await timed.close();
    }
  });
});
