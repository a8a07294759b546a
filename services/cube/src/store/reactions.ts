import type { Principal } from "@unimatrix/service-kit/auth";
import { NotFoundError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../handlers/deps";
import { ACTIVITY, ringAfterCommit } from "../live/channels";
import { type AccessLevel, actorKey, WRITE } from "../rules/access";
import { staleAtFor } from "../rules/lease";
import { notificationText } from "../rules/preview";
import { viewerOf, visibleTo } from "../rules/visibility";
import { type CubeStanding, requireAccess } from "./access";
import { labelOf, loadItems } from "./activity";
import { renewHolderClaims } from "./leases";
import { insertNotifications, type NewNotification } from "./notifications";
import { inTransaction, type PrismaClient, type Tx } from "./prisma";
import { markAcked } from "./receipts";
import type { ActivityRow, Claim, ItemRow } from "./rows";

/** What AckEntry did: whether this ack is new, and the entry as it is now. */
export interface AckResult {
  readonly newlyAcked: boolean;
  readonly entry: ItemRow;
}

/** What ClaimEntry did: claimed now, already held by the caller, or held by another; the claim and the entry. */
export interface ClaimResult {
  readonly outcome: "claimed" | "held" | "other";
  readonly claim: Claim | null;
  readonly entry: ItemRow;
}

/** What ReleaseClaim did: released, nothing to release, or held by another (with that claim); the entry. */
export interface ReleaseResult {
  readonly outcome: "released" | "none" | "other";
  readonly claim: Claim | null;
  readonly entry: ItemRow;
}

/** The caller's standing (at `level`, default WRITE) and a visible entry of the cube, else NOT_FOUND. */
export async function visibleEntry(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  entryId: string,
  what: string,
  level: AccessLevel = WRITE,
) {
  const s = await requireAccess(deps.prisma, principal, cubeId, level, what);
  const entry = await deps.prisma.activityItem.findFirst({ where: { id: entryId, cubeId, itemType: "entry" } });
  if (!entry || !visibleTo(viewerOf(s), entry)) throw new NotFoundError("entry not found");
  return { s, entry };
}

/** The entry's current claim (HELD or STALE); null when unclaimed or released. */
export async function currentClaim(db: PrismaClient | Tx, entryId: string): Promise<Claim | null> {
  return db.claim.findFirst({ where: { entryId, state: { not: "released" } } });
}

export async function entryNow(tx: Tx, entry: ActivityRow): Promise<ItemRow> {
  const [item] = await loadItems(tx, [entry]);
  return item as ItemRow;
}

/** The claim audience: the direct recipients, or for a broadcast every participant drone; minus `except`. */
export async function claimAudience(tx: Tx, entry: ActivityRow, except: string | undefined): Promise<string[]> {
  let ids: string[];
  if (entry.visibility === "direct") {
    // Evicted recipients are out of the audience.
    const live = await tx.drone.findMany({
      where: { id: { in: entry.recipientDroneIds }, evictedAt: null },
      select: { id: true },
    });
    const liveIds = new Set(live.map((d) => d.id));
    ids = entry.recipientDroneIds.filter((id) => liveIds.has(id));
  } else {
    const rows = await tx.$queryRaw<{ id: string }[]>`
      SELECT d.id::text FROM drones d
      JOIN clients c ON c.id = d.client_id AND c.revoked_at IS NULL
      JOIN cube_grants g ON g.client_id = d.client_id AND g.cube_id = d.cube_id AND g.access >= 2
      WHERE d.cube_id = ${entry.cubeId}::uuid AND d.evicted_at IS NULL
      ORDER BY d.created_at, d.id`;
    ids = rows.map((r) => r.id);
  }
  return ids.filter((id) => id !== except);
}

export function notes(
  audience: string[],
  kind: "claim" | "release" | "takeover",
  entry: ActivityRow,
  s: CubeStanding,
): NewNotification[] {
  const text = notificationText(kind, entry.message);
  return audience.map((recipientDroneId) => ({
    recipientDroneId,
    kind,
    text,
    entryId: entry.id,
    actorDroneId: s.drone?.id,
    actorRoleName: s.drone?.roleName,
  }));
}

/**
 * Acks an entry once per principal. A new ack by a drone marks its receipt acked, renews its held
 * claims, and notifies the author drone — unless the ack is quiet, the entry expects no reply, or
 * the same drone acked to the same author within the coalescing window.
 */
export async function ackEntry(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  entryId: string,
  quiet = false,
): Promise<AckResult> {
  const { s, entry } = await visibleEntry(deps, principal, cubeId, entryId, "acking");
  await deps.guard.admit(300);
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    const inserted = await tx.$queryRaw<{ entry_id: string }[]>`
      INSERT INTO acks (entry_id, principal_id, drone_id, created_at)
      VALUES (${entryId}::uuid, ${actorKey(principal)}, ${s.drone?.id ?? null}::uuid, ${now})
      ON CONFLICT DO NOTHING RETURNING entry_id::text`;
    const newlyAcked = inserted.length > 0;
    if (newlyAcked && s.drone) {
      await renewHolderClaims(tx, s.drone.id, now, deps.config.claimLeaseSeconds);
      await markAcked(tx, s.drone.id, entryId, now);
    }
    const notify =
      newlyAcked &&
      !quiet &&
      entry.expectsReply &&
      s.drone &&
      entry.authorDroneId &&
      entry.authorDroneId !== s.drone.id;
    if (notify && s.drone && entry.authorDroneId) {
      await insertNotifications(
        tx,
        cubeId,
        [
          {
            recipientDroneId: entry.authorDroneId,
            kind: "ack",
            text: notificationText("ack", entry.message),
            entryId,
            actorDroneId: s.drone.id,
            actorRoleName: s.drone.roleName,
          },
        ],
        now,
        deps.config.notifyCoalesceSeconds,
      );
    }
    return { newlyAcked, entry: await entryNow(tx, entry) };
  });
  if (result.newlyAcked) await ringAfterCommit(deps, [cubeId], ACTIVITY);
  return result;
}

/** Claims an entry exclusively: the first claimant wins; one CLAIM notification per audience drone. */
export async function claimEntry(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  entryId: string,
): Promise<ClaimResult> {
  const { s, entry } = await visibleEntry(deps, principal, cubeId, entryId, "claiming");
  await deps.guard.admit(300);
  const now = deps.clock.now();
  const key = actorKey(principal);
  const label = await labelOf(deps.prisma, principal, s);
  const result = await inTransaction(deps.prisma, async (tx) => {
    // The first claim inserts fence 1; a claim after a release takes the released row with fence + 1.
    // The row lock (insert or conflict) makes exactly one of concurrent claimants win.
    const due = staleAtFor(now, deps.config.claimLeaseSeconds);
    const inserted = await tx.$queryRaw<{ entry_id: string }[]>`
      INSERT INTO claims (entry_id, holder_principal_id, holder_drone_id, holder_label, claimed_at, fence, state,
                          renewed_at, stale_at, cube_id)
      VALUES (${entryId}::uuid, ${key}, ${s.drone?.id ?? null}::uuid, ${label}, ${now}, 1, 'held', ${now}, ${due},
              ${cubeId}::uuid)
      ON CONFLICT (entry_id) DO UPDATE SET holder_principal_id = EXCLUDED.holder_principal_id,
        holder_drone_id = EXCLUDED.holder_drone_id, holder_label = EXCLUDED.holder_label,
        claimed_at = EXCLUDED.claimed_at, fence = claims.fence + 1, state = 'held',
        renewed_at = EXCLUDED.renewed_at, stale_at = EXCLUDED.stale_at
        WHERE claims.state = 'released'
      RETURNING entry_id::text`;
    let outcome: "claimed" | "held" | "other";
    if (inserted.length > 0) {
      outcome = "claimed";
      await insertNotifications(tx, cubeId, notes(await claimAudience(tx, entry, s.drone?.id), "claim", entry, s), now);
    } else {
      const holder = await currentClaim(tx, entryId);
      outcome = holder?.holderPrincipalId === key ? "held" : "other";
    }
    // Null only when the holder released it in between (READ COMMITTED): answered as no claim.
    const claim = await currentClaim(tx, entryId);
    return { outcome, claim, entry: await entryNow(tx, entry) };
  });
  if (result.outcome === "claimed") await ringAfterCommit(deps, [cubeId], ACTIVITY);
  return result;
}

/** Releases the caller's claim; the audience (minus the releaser) is told. */
export async function releaseClaim(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  entryId: string,
): Promise<ReleaseResult> {
  const { s, entry } = await visibleEntry(deps, principal, cubeId, entryId, "releasing");
  const now = deps.clock.now();
  const key = actorKey(principal);
  const result = await inTransaction(deps.prisma, async (tx) => {
    // The row stays (state 'released') so the next claim takes fence + 1.
    const deleted = await tx.$queryRaw<{ entry_id: string }[]>`
      UPDATE claims SET state = 'released', stale_at = ${now}
      WHERE entry_id = ${entryId}::uuid AND holder_principal_id = ${key} AND state <> 'released'
      RETURNING entry_id::text`;
    let outcome: "released" | "none" | "other";
    let claim: Claim | null = null;
    if (deleted.length > 0) {
      outcome = "released";
      await insertNotifications(
        tx,
        cubeId,
        notes(await claimAudience(tx, entry, s.drone?.id), "release", entry, s),
        now,
      );
    } else {
      claim = await currentClaim(tx, entryId);
      outcome = claim ? "other" : "none";
    }
    return { outcome, claim, entry: await entryNow(tx, entry) };
  });
  if (result.outcome === "released") await ringAfterCommit(deps, [cubeId], ACTIVITY);
  return result;
}
