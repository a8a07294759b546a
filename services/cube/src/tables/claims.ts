/** Rows of `claims`: one per claimed entry (HELD, STALE or RELEASED), with its fence. Row SQL only. */
import type { RawQuery } from "@unimatrix/service-kit/store";
import { type LeaseFacts, type LeaseState, staleAtFor } from "../rules/lease";
import type { PrismaClient, Tx } from "../store/prisma";
import type { Claim } from "../store/rows";

/**
 * THE renewal of a drone's activity (post, ack, read, wait, attach): every HELD claim of the drone
 * is renewed now and due a claim lease from now. A STALE claim stays stale (RenewClaim brings it
 * back explicitly). The append's one statement inlines the same update (tables/entries.ts).
 */
export async function renewHeldClaims(db: RawQuery, droneId: string, now: Date, leaseSeconds: number): Promise<void> {
  await db.$queryRaw`
    UPDATE claims SET renewed_at = ${now}, stale_at = ${staleAtFor(now, leaseSeconds)}
    WHERE holder_drone_id = ${droneId}::uuid AND state = 'held' AND renewed_at < ${now}
    RETURNING entry_id`;
}

/** The entry's current claim (HELD or STALE); null when unclaimed or released. */
export function currentClaim(db: PrismaClient | Tx, entryId: string): Promise<Claim | null> {
  return db.claim.findFirst({ where: { entryId, state: { not: "released" } } });
}

/** Who claims, as the claim row records the holder. */
export interface Claimant {
  readonly principalId: string;
  readonly droneId: string | null;
  readonly label: string;
}

/**
 * Claims an entry when it is unclaimed (fence 1) or released (fence + 1): the row lock (insert or
 * conflict) makes exactly one of concurrent claimants win. Returns whether this call claimed it.
 */
export async function claimIfFree(
  tx: RawQuery,
  cubeId: string,
  entryId: string,
  holder: Claimant,
  now: Date,
  leaseSeconds: number,
): Promise<boolean> {
  const due = staleAtFor(now, leaseSeconds);
  const inserted = await tx.$queryRaw<{ entry_id: string }[]>`
    INSERT INTO claims (entry_id, holder_principal_id, holder_drone_id, holder_label, claimed_at, fence, state,
                        renewed_at, stale_at, cube_id)
    VALUES (${entryId}::uuid, ${holder.principalId}, ${holder.droneId}::uuid, ${holder.label}, ${now}, 1, 'held',
            ${now}, ${due}, ${cubeId}::uuid)
    ON CONFLICT (entry_id) DO UPDATE SET holder_principal_id = EXCLUDED.holder_principal_id,
      holder_drone_id = EXCLUDED.holder_drone_id, holder_label = EXCLUDED.holder_label,
      claimed_at = EXCLUDED.claimed_at, fence = claims.fence + 1, state = 'held',
      renewed_at = EXCLUDED.renewed_at, stale_at = EXCLUDED.stale_at
      WHERE claims.state = 'released'
    RETURNING entry_id::text`;
  return inserted.length > 0;
}

/** Releases the holder's claim (the row stays, RELEASED, so the next claim takes fence + 1). Whether it did. */
export async function releaseHeld(tx: RawQuery, entryId: string, holderPrincipalId: string, now: Date) {
  const released = await tx.$queryRaw<{ entry_id: string }[]>`
    UPDATE claims SET state = 'released', stale_at = ${now}
    WHERE entry_id = ${entryId}::uuid AND holder_principal_id = ${holderPrincipalId} AND state <> 'released'
    RETURNING entry_id::text`;
  return released.length > 0;
}

/** Renews the holder's claim (a STALE one is HELD again, same fence). Whether the caller holds it. */
export async function renewOne(
  db: RawQuery,
  entryId: string,
  holderPrincipalId: string,
  now: Date,
  leaseSeconds: number,
) {
  const renewed = await db.$queryRaw<{ entry_id: string }[]>`
    UPDATE claims SET state = 'held', renewed_at = ${now}, stale_at = ${staleAtFor(now, leaseSeconds)}
    WHERE entry_id = ${entryId}::uuid AND holder_principal_id = ${holderPrincipalId} AND state IN ('held', 'stale')
    RETURNING entry_id::text`;
  return renewed.length > 0;
}

/** A claim row as the take-over reads it under its lock. */
export interface LockedClaim {
  readonly fence: bigint;
  readonly state: LeaseState;
  readonly holderPrincipalId: string;
  readonly holderDroneId: string | null;
}

/** The claim row of an entry locked `FOR UPDATE` (the take-over's one read of it), or null. */
export async function lockClaim(tx: RawQuery, entryId: string): Promise<LockedClaim | null> {
  const [row] = await tx.$queryRaw<
    { fence: bigint | string; state: string; holder_principal_id: string; holder_drone_id: string | null }[]
  >`
    SELECT fence, state, holder_principal_id, holder_drone_id::text FROM claims
    WHERE entry_id = ${entryId}::uuid FOR UPDATE`;
  if (!row) return null;
  return {
    fence: BigInt(row.fence),
    state: row.state as LeaseState,
    holderPrincipalId: row.holder_principal_id,
    holderDroneId: row.holder_drone_id,
  };
}

/** Moves a (locked) claim to a new holder: fence + 1, HELD, renewed now. */
export async function takeOver(tx: RawQuery, entryId: string, holder: Claimant, now: Date, leaseSeconds: number) {
  await tx.$queryRaw`
    UPDATE claims SET holder_principal_id = ${holder.principalId}, holder_drone_id = ${holder.droneId}::uuid,
      holder_label = ${holder.label}, claimed_at = ${now}, fence = fence + 1, state = 'held', renewed_at = ${now},
      stale_at = ${staleAtFor(now, leaseSeconds)}
    WHERE entry_id = ${entryId}::uuid
    RETURNING entry_id`;
}

/** What the lease rules look at of a claim row. */
export function leaseFacts(claim: Claim | null, staleAt?: Date): LeaseFacts | null {
  if (!claim) return null;
  return {
    fence: BigInt(claim.fence),
    state: claim.state as LeaseState,
    holderPrincipalId: claim.holderPrincipalId,
    staleAt: staleAt ?? claim.staleAt,
  };
}

/** Whether a drone has a live session (unrevoked, unexpired at `now`). */
export async function droneLive(db: PrismaClient | Tx, droneId: string, now: Date): Promise<boolean> {
  return (await db.droneSession.count({ where: { droneId, revokedAt: null, expiresAt: { gt: now } } })) > 0;
}

/** The most claims one scan round turns stale (the liveness scan's cap). */
const CLAIM_SCAN_LIMIT = 25;

/**
 * Turns due claims STALE: up to 25 HELD claims past their due time or whose holder drone has no
 * live session, picked `FOR UPDATE SKIP LOCKED` and updated in one conditional statement — replicas
 * scanning together split the rows, and a committed claim is no longer HELD, so exactly one
 * replica acts on each. Returns the claims it turned stale.
 */
export async function staleDueClaims(tx: RawQuery, now: Date) {
  return tx.$queryRaw<{ entry_id: string; cube_id: string; holder_drone_id: string | null }[]>`
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
}
