import { status } from "@grpc/grpc-js";
import {
  ClaimOutcome,
  ReleaseOutcome,
  RenewOutcome,
  TakeOverOutcome,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { ClaimState } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import { type Harness, newClient, newCube, newTenant, post, type Replica, seat, startHarness } from "./harness";

const LEASE_S = 900;

/** Notifications of a kind about an entry, per recipient drone. */
async function noticesOf(h: Harness, kind: string, entryId: string): Promise<Map<string, number>> {
  const rows = await h.sql<{ recipient: string; n: string }>(
    `SELECT recipient_drone_ids[1]::text AS recipient, count(*) AS n FROM activity_items
     WHERE item_type = 'notification' AND notification_kind = $1 AND entry_id = $2 GROUP BY 1`,
    [kind, entryId],
  );
  return new Map(rows.map((r) => [r.recipient, Number(r.n)]));
}

describe("claim leases with fences", () => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 8));
  let h: Harness;
  let r2: Replica;
  beforeAll(async () => {
    h = await startHarness("cube_leases", { clock });
    r2 = await h.replica();
  });
  afterAll(async () => {
    await h.close();
  });

  /** A cube with a user poster, a holder drone on its own client and `n` contender drones (half on each replica). */
  async function world(label: string, n: number) {
    const t = await newTenant(h, label);
    const owner = await newClient(h, t.userToken, "owner");
    const holderClient = await newClient(h, t.userToken, "holder");
    const { cubeId } = await newCube(h, owner.token);
    await h.identity.setCubeGrant({ clientId: holderClient.id, cubeId, access: 2 }, asBearer(t.userToken));
    const holder = await seat(h, holderClient.token, cubeId);
    const contenders = [];
    for (let i = 0; i < n; i++) contenders.push(await seat(h, owner.token, cubeId));
    return { t, owner, holderClient, cubeId, holder, contenders };
  }

  it("a killed holder's claim turns STALE within the lease, the audience is told once, one of 20 contenders takes it over with fence + 1", async () => {
    const w = await world("lease-kill", 20);
    const entry = await post(h, w.t.userToken, w.cubeId, "refactor the parser");
    const claimed = await h.activity.claimEntry({ cubeId: w.cubeId, entryId: entry.id }, asBearer(w.holder.token));
    expect(claimed.outcome).toBe(ClaimOutcome.CLAIMED);
    expect(claimed.claim?.fence).toBe(1n);
    expect(claimed.claim?.state).toBe(ClaimState.HELD);
    const check1 = await h.activity.checkFence(
      { cubeId: w.cubeId, entryId: entry.id, fence: 1n },
      asBearer(w.t.userToken),
    );
    expect(check1.holds).toBe(true);

    // Kill the holder's session (rotating its client's credential revokes it), well within the lease.
    await h.identity.rotateClientCredential({ clientId: w.holderClient.id }, asBearer(w.t.userToken));
    clock.advance(60_000);
    // Strict check: the lapse holds no more even before the scan records it.
    expect(
      (await h.activity.checkFence({ cubeId: w.cubeId, entryId: entry.id, fence: 1n }, asBearer(w.t.userToken))).holds,
    ).toBe(false);
    // Both replicas scan at once, several times: the claim turns stale exactly once.
    const rounds = await Promise.all([h.service.livenessRound(), r2.service.livenessRound()]);
    expect(rounds.flatMap((r) => r.staleClaims)).toEqual([entry.id]);
    for (let i = 0; i < 3; i++) {
      const again = await Promise.all([h.service.livenessRound(), r2.service.livenessRound()]);
      expect(again.flatMap((r) => r.staleClaims)).toEqual([]);
    }
    const stale = await noticesOf(h, "claim_stale", entry.id);
    const everyone = [w.holder.droneId, ...w.contenders.map((c) => c.droneId)].sort();
    expect([...stale.keys()].sort()).toEqual(everyone);
    expect([...stale.values()].every((n) => n === 1)).toBe(true);

    const read = await h.activity.readActivity({ cubeId: w.cubeId, cursor: "" }, asBearer(w.t.userToken));
    const seen = read.items.find((i) => i.item.case === "entry" && i.item.value.id === entry.id);
    const seenClaim = seen?.item.case === "entry" ? seen.item.value.claim : undefined;
    expect(seenClaim?.state).toBe(ClaimState.STALE);
    expect(seenClaim?.fence).toBe(1n);

    // 20 contenders race on two replicas: exactly one wins, with fence 2.
    const results = await Promise.all(
      w.contenders.map((c, i) =>
        (i % 2 === 0 ? h : r2).activity.takeOverClaim(
          { cubeId: w.cubeId, entryId: entry.id, fence: 1n },
          asBearer(c.token),
        ),
      ),
    );
    const winners = results.filter((r) => r.outcome === TakeOverOutcome.TAKEN_OVER);
    expect(winners).toHaveLength(1);
    expect(results.filter((r) => r.outcome === TakeOverOutcome.FENCE_MOVED)).toHaveLength(19);
    const winner = w.contenders[results.indexOf(winners[0] as (typeof results)[number])];
    expect(winners[0]?.claim?.fence).toBe(2n);
    expect(winners[0]?.claim?.holderDroneId).toBe(winner?.droneId);
    expect(winners[0]?.claim?.state).toBe(ClaimState.HELD);

    const user = asBearer(w.t.userToken);
    expect((await h.activity.checkFence({ cubeId: w.cubeId, entryId: entry.id, fence: 1n }, user)).holds).toBe(false);
    expect((await h.activity.checkFence({ cubeId: w.cubeId, entryId: entry.id, fence: 2n }, user)).holds).toBe(true);
    expect((await r2.activity.checkFence({ cubeId: w.cubeId, entryId: entry.id, fence: 3n }, user)).holds).toBe(false);

    // TAKEOVER: the former holder and the audience, not the new holder, once each.
    const takeover = await noticesOf(h, "takeover", entry.id);
    expect([...takeover.keys()].sort()).toEqual(everyone.filter((id) => id !== winner?.droneId));
    expect([...takeover.values()].every((n) => n === 1)).toBe(true);

    // The loser's retry with the old fence, and the winner's own take-over, change nothing.
    const loser = w.contenders.find((c) => c !== winner) as (typeof w.contenders)[number];
    const late = await h.activity.takeOverClaim(
      { cubeId: w.cubeId, entryId: entry.id, fence: 2n },
      asBearer(loser.token),
    );
    expect(late.outcome).toBe(TakeOverOutcome.NOT_STALE);
    const own = await h.activity.takeOverClaim(
      { cubeId: w.cubeId, entryId: entry.id, fence: 2n },
      asBearer(winner?.token ?? ""),
    );
    expect(own.outcome).toBe(TakeOverOutcome.ALREADY_HELD);
  });

  it("many stale claims split across two replicas' scans: each turns stale once, each audience drone told once", async () => {
    const w = await world("lease-fleet", 2);
    const entries = [];
    for (let i = 0; i < 30; i++) entries.push(await post(h, w.t.userToken, w.cubeId, `task ${i}`));
    for (const e of entries) await h.activity.claimEntry({ cubeId: w.cubeId, entryId: e.id }, asBearer(w.holder.token));
    await h.identity.rotateClientCredential({ clientId: w.holderClient.id }, asBearer(w.t.userToken));
    const staled: string[] = [];
    for (let i = 0; i < 4; i++) {
      const rounds = await Promise.all([h.service.livenessRound(), r2.service.livenessRound()]);
      staled.push(...rounds.flatMap((r) => r.staleClaims));
    }
    expect(staled.sort()).toEqual(entries.map((e) => e.id).sort());
    for (const e of entries) {
      const told = await noticesOf(h, "claim_stale", e.id);
      expect(told.size).toBe(3);
      expect([...told.values()].every((n) => n === 1)).toBe(true);
    }
  });

  it("the holder's activity renews the lease; silence past it turns the claim stale; RenewClaim brings it back; release then claim takes fence + 1", async () => {
    const w = await world("lease-silence", 1);
    const other = w.contenders[0] as (typeof w.contenders)[number];
    const entry = await post(h, w.t.userToken, w.cubeId, "write the docs");
    const target = { cubeId: w.cubeId, entryId: entry.id };
    // Claims of the other tests lapse on the shared clock too: look at this one only.
    const staleHere = async () => (await h.service.livenessRound()).staleClaims.filter((id) => id === entry.id);
    await h.activity.claimEntry(target, asBearer(w.holder.token));
    clock.advance((LEASE_S - 1) * 1000);
    expect(await staleHere()).toEqual([]);
    // A read by the holder renews its lease.
    await h.activity.readUnread({ cubeId: w.cubeId }, asBearer(w.holder.token));
    clock.advance((LEASE_S - 1) * 1000);
    expect(await staleHere()).toEqual([]);
    // A post renews it too.
    await post(h, w.holder.token, w.cubeId, "still on it");
    clock.advance((LEASE_S - 1) * 1000);
    expect(await staleHere()).toEqual([]);
    clock.advance(1000);
    expect(await staleHere()).toEqual([entry.id]);
    expect((await noticesOf(h, "claim_stale", entry.id)).get(w.holder.droneId)).toBe(1);

    // Someone else cannot renew; the holder can, same fence, HELD again.
    const notHolder = await h.activity.renewClaim(target, asBearer(other.token));
    expect(notHolder.outcome).toBe(RenewOutcome.NOT_HOLDER);
    expect(notHolder.claim?.state).toBe(ClaimState.STALE);
    const renewed = await h.activity.renewClaim(target, asBearer(w.holder.token));
    expect(renewed.outcome).toBe(RenewOutcome.RENEWED);
    expect(renewed.claim?.state).toBe(ClaimState.HELD);
    expect(renewed.claim?.fence).toBe(1n);
    expect((await h.activity.checkFence({ ...target, fence: 1n }, asBearer(other.token))).holds).toBe(true);
    const notStale = await h.activity.takeOverClaim({ ...target, fence: 1n }, asBearer(other.token));
    expect(notStale.outcome).toBe(TakeOverOutcome.NOT_STALE);

    // Release is explicit; the next claim takes fence 2.
    const released = await h.activity.releaseClaim(target, asBearer(w.holder.token));
    expect(released.outcome).toBe(ReleaseOutcome.RELEASED);
    expect(released.entry?.claim).toBeUndefined();
    expect((await h.activity.checkFence({ ...target, fence: 1n }, asBearer(other.token))).holds).toBe(false);
    const notClaimed = await h.activity.takeOverClaim({ ...target, fence: 1n }, asBearer(other.token));
    expect(notClaimed.outcome).toBe(TakeOverOutcome.NOT_CLAIMED);
    const again = await h.activity.claimEntry(target, asBearer(other.token));
    expect(again.outcome).toBe(ClaimOutcome.CLAIMED);
    expect(again.claim?.fence).toBe(2n);
    expect(again.claim?.holderDroneId).toBe(other.droneId);
    const moved = await h.activity.takeOverClaim({ ...target, fence: 1n }, asBearer(w.holder.token));
    expect(moved.outcome).toBe(TakeOverOutcome.FENCE_MOVED);
  });

  it("bad fence requests name the field; unknown entries are NOT_FOUND; CheckFence needs only READ", async () => {
    const w = await world("lease-bad", 1);
    const entry = await post(h, w.t.userToken, w.cubeId, "x");
    const user = asBearer(w.t.userToken);
    await expectStatus(
      h.activity.checkFence({ cubeId: w.cubeId, entryId: entry.id, fence: 0n }, user),
      status.INVALID_ARGUMENT,
      "fence",
    );
    await expectStatus(
      h.activity.takeOverClaim({ cubeId: w.cubeId, entryId: entry.id, fence: 0n }, user),
      status.INVALID_ARGUMENT,
      "fence",
    );
    await expectStatus(
      h.activity.checkFence({ cubeId: w.cubeId, entryId: crypto.randomUUID(), fence: 1n }, user),
      status.NOT_FOUND,
    );
    await expectStatus(
      h.activity.renewClaim({ cubeId: w.cubeId, entryId: "NOT-A-UUID" }, user),
      status.INVALID_ARGUMENT,
      "entry_id",
    );
    const reader = await newClient(h, w.t.userToken, "reader");
    await h.identity.setCubeGrant({ clientId: reader.id, cubeId: w.cubeId, access: 1 }, user);
    const check = await h.activity.checkFence(
      { cubeId: w.cubeId, entryId: entry.id, fence: 1n },
      asBearer(reader.token),
    );
    expect(check.holds).toBe(false);
    expect(check.claim).toBeUndefined();
    await expectStatus(
      h.activity.takeOverClaim({ cubeId: w.cubeId, entryId: entry.id, fence: 1n }, asBearer(reader.token)),
      status.PERMISSION_DENIED,
    );
  });
});
