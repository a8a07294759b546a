import type { Principal } from "@unimatrix/service-kit/auth";
import type { RawQuery } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../handlers/deps";
import { ACTIVITY, ringAfterCommit } from "../live/channels";
import { actorKey, READ } from "../rules/access";
import { fenceHolds, type LeaseState, staleAtFor, type TakeOverDecision, takeOverDecision } from "../rules/lease";
import { notificationText } from "../rules/preview";
import { labelOf } from "./activity";
import { type QueuedFor, ringNotices } from "./notices";
import { insertNotifications } from "./notifications";
import { inTransaction } from "./prisma";
import { claimAudience, currentClaim, notes, visibleEntry } from "./reactions";
import type { Claim } from "./rows";

/**
 * Renews every HELD claim of a drone (its activity: post, ack, read, attach): renewed now, due a
 * claim lease from now. A STALE claim stays stale (RenewClaim brings it back explicitly).
 */
export async function renewHolderClaims(db: RawQuery, droneId: string, now: Date, leaseSeconds: number): Promise<void> {
  await db.$queryRaw`
    UPDATE claims SET renewed_at = ${now}, stale_at = ${staleAtFor(now, leaseSeconds)}
    WHERE holder_drone_id = ${droneId}::uuid AND state = 'held' AND renewed_at < ${now}
    RETURNING entry_id`;
}

/** What RenewClaim did: renewed (a STALE claim is HELD again), or the caller is not the holder; the claim now. */
export interface RenewResult {
  readonly outcome: "renewed" | "not_holder";
  readonly claim: Claim | null;
}

/** Renews the caller's claim lease (same fence). Requires WRITE and a visible entry. */
export async function renewClaim(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  entryId: string,
): Promise<RenewResult> {
  await visibleEntry(deps, principal, cubeId, entryId, "renewing a claim");
  const now = deps.clock.now();
  const renewed = await deps.prisma.$queryRaw<{ entry_id: string }[]>`
    UPDATE claims SET state = 'held', renewed_at = ${now}, stale_at = ${staleAtFor(now, deps.config.claimLeaseSeconds)}
    WHERE entry_id = ${entryId}::uuid AND holder_principal_id = ${actorKey(principal)} AND state IN ('held', 'stale')
    RETURNING entry_id::text`;
  return { outcome: renewed.length > 0 ? "renewed" : "not_holder", claim: await currentClaim(deps.prisma, entryId) };
}

/** What TakeOverClaim did, with the claim after the call (null when not claimed). */
export interface TakeOverResult {
  readonly outcome: TakeOverDecision;
  readonly claim: Claim | null;
}

/**
 * Takes over a STALE claim with the fence the caller saw: the claim row is locked (`FOR UPDATE`),
 * so concurrent callers on any replica queue on it; the first takes it (fence + 1) and every later
 * one reads the moved fence. The former holder and the audience (minus the new holder) get TAKEOVER.
 */
export async function takeOverClaim(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  entryId: string,
  fence: bigint,
): Promise<TakeOverResult> {
  const { s, entry } = await visibleEntry(deps, principal, cubeId, entryId, "taking over a claim");
  await deps.guard.admit(300);
  const now = deps.clock.now();
  const key = actorKey(principal);
  const label = await labelOf(deps.prisma, principal, s);
  const machines: QueuedFor[] = [];
  const result = await inTransaction(deps.prisma, async (tx) => {
    const [locked] = await tx.$queryRaw<{ fence: bigint | string; state: string; holder_principal_id: string }[]>`
      SELECT fence, state, holder_principal_id FROM claims WHERE entry_id = ${entryId}::uuid FOR UPDATE`;
    const before = await tx.claim.findUnique({ where: { entryId } });
    const facts = locked
      ? {
          fence: BigInt(locked.fence),
          state: locked.state as LeaseState,
          holderPrincipalId: locked.holder_principal_id,
          staleAt: now,
        }
      : null;
    const outcome = takeOverDecision(facts, key, fence);
    if (outcome === "take_over") {
      await tx.$executeRaw`
        UPDATE claims SET holder_principal_id = ${key}, holder_drone_id = ${s.drone?.id ?? null}::uuid,
          holder_label = ${label}, claimed_at = ${now}, fence = fence + 1, state = 'held', renewed_at = ${now},
          stale_at = ${staleAtFor(now, deps.config.claimLeaseSeconds)}
        WHERE entry_id = ${entryId}::uuid`;
      const audience = await claimAudience(tx, entry, s.drone?.id);
      const former = before?.holderDroneId;
      if (former && former !== s.drone?.id && !audience.includes(former)) audience.unshift(former);
      const written = await insertNotifications(tx, cubeId, notes(audience, "takeover", entry, s), now);
      machines.push(...written.noticesFor);
    }
    return { outcome, claim: await currentClaim(tx, entryId) };
  });
  if (result.outcome === "take_over") await ringAfterCommit(deps, [cubeId], ACTIVITY);
  await ringNotices(deps, machines);
  return result;
}

/** CheckFence: whether `fence` is the entry's current HELD claim (strict, see fenceHolds). Requires READ. */
export async function checkFence(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  entryId: string,
  fence: bigint,
): Promise<{ holds: boolean; claim: Claim | null }> {
  await visibleEntry(deps, principal, cubeId, entryId, "checking a fence", READ);
  const now = deps.clock.now();
  const claim = await currentClaim(deps.prisma, entryId);
  let holderLive = true;
  if (claim?.holderDroneId) {
    holderLive =
      (await deps.prisma.droneSession.count({
        where: { droneId: claim.holderDroneId, revokedAt: null, expiresAt: { gt: now } },
      })) > 0;
  }
  const facts = claim
    ? {
        fence: BigInt(claim.fence),
        state: claim.state as LeaseState,
        holderPrincipalId: claim.holderPrincipalId,
        staleAt: claim.staleAt,
      }
    : null;
  return { holds: fenceHolds(facts, fence, now, holderLive), claim };
}

/** The most claims one scan round turns stale (the liveness scan's cap). */
export const CLAIM_SCAN_LIMIT = 25;

/**
 * One round of claim leases (the liveness scan): up to 25 HELD claims past their due time or whose
 * holder drone has no live session turn STALE in one conditional UPDATE over rows picked with
 * `FOR UPDATE SKIP LOCKED` — replicas scanning together split the rows, and a committed claim is no
 * longer HELD, so exactly one replica acts on each. In the same transaction, the holder and the
 * audience get CLAIM_STALE once. Returns the entry ids whose claims turned stale.
 */
export async function scanClaims(deps: CubeDeps): Promise<string[]> {
  const now = deps.clock.now();
  const machines: QueuedFor[] = [];
  const staled = await inTransaction(deps.prisma, async (tx) => {
    const rows = await tx.$queryRaw<{ entry_id: string; cube_id: string; holder_drone_id: string | null }[]>`
      WITH due AS (
        SELECT c.entry_id FROM claims c
        WHERE c.state = 'held'
          AND (c.stale_at <= ${now}
               OR (c.holder_drone_id IS NOT NULL AND NOT EXISTS (
                     SELECT 1 FROM drone_sessions s
                     WHERE s.drone_id = c.holder_drone_id AND s.revoked_at IS NULL AND s.expires_at > ${now})))
        ORDER BY c.stale_at, c.entry_id
        LIMIT ${CLAIM_SCAN_LIMIT}
        FOR UPDATE OF c SKIP LOCKED
      )
      UPDATE claims SET state = 'stale', stale_at = ${now}
      FROM due WHERE claims.entry_id = due.entry_id AND claims.state = 'held'
      RETURNING claims.entry_id::text, claims.cube_id::text, claims.holder_drone_id::text`;
    // Cube rows are locked (positions taken) in one order by every scanner: no deadlock between replicas.
    for (const row of [...rows].sort((a, b) => a.cube_id.localeCompare(b.cube_id))) {
      const entry = await tx.activityItem.findUniqueOrThrow({ where: { id: row.entry_id } });
      const audience = await claimAudience(tx, entry, row.holder_drone_id ?? undefined);
      if (row.holder_drone_id) audience.unshift(row.holder_drone_id);
      const text = notificationText("claim_stale", entry.message);
      const written = await insertNotifications(
        tx,
        row.cube_id,
        audience.map((recipientDroneId) => ({ recipientDroneId, kind: "claim_stale", text, entryId: entry.id })),
        now,
      );
      machines.push(...written.noticesFor);
    }
    return rows;
  });
  await ringAfterCommit(
    deps,
    staled.map((r) => r.cube_id),
    ACTIVITY,
  );
  await ringNotices(deps, machines);
  return staled.map((r) => r.entry_id);
}
