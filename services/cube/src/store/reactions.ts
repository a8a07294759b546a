import { NotFoundError, type Principal } from "@unimatrix/service-kit";
import type { ActivityItem as ActivityRow, Claim } from "../../generated/prisma/client";
import { entryToWire } from "../convert";
import { ACTIVITY, type CubeDeps, ring } from "../deps";
import { preview } from "../validate";
import { type CubeStanding, requireAccess, WRITE } from "./access";
import {
  actorKey,
  extrasFor,
  insertNotifications,
  labelOf,
  type NewNotification,
  viewerOf,
  visibleTo,
} from "./activity";
import { inTransaction, type Tx } from "./prisma";

async function visibleEntry(deps: CubeDeps, principal: Principal, cubeId: string, entryId: string, what: string) {
  const s = await requireAccess(deps.prisma, principal, cubeId, WRITE, what);
  const entry = await deps.prisma.activityItem.findFirst({ where: { id: entryId, cubeId, itemType: "entry" } });
  if (!entry || !visibleTo(viewerOf(s), entry)) throw new NotFoundError("entry not found");
  return { s, entry };
}

async function entryNow(tx: Tx, entry: ActivityRow) {
  const extras = await extrasFor(tx, [entry.id]);
  return entryToWire(entry, extras.get(entry.id) ?? { ackCount: 0, ackedByDroneIds: [] });
}

/** The claim audience: the direct recipients, or for a broadcast every participant drone; minus `except`. */
async function claimAudience(tx: Tx, entry: ActivityRow, except: string | undefined): Promise<string[]> {
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

function notes(audience: string[], kind: "claim" | "release", entry: ActivityRow, s: CubeStanding): NewNotification[] {
  const text = `[${kind.toUpperCase()}] ${preview(entry.message)}`;
  return audience.map((recipientDroneId) => ({
    recipientDroneId,
    kind,
    text,
    entryId: entry.id,
    actorDroneId: s.drone?.id,
    actorRoleName: s.drone?.roleName,
  }));
}

/** Acks an entry once per principal; a new ack by a drone notifies the author drone. */
export async function ackEntry(deps: CubeDeps, principal: Principal, cubeId: string, entryId: string) {
  const { s, entry } = await visibleEntry(deps, principal, cubeId, entryId, "acking");
  await deps.guard.admit(300);
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    const inserted = await tx.$queryRaw<{ entry_id: string }[]>`
      INSERT INTO acks (entry_id, principal_id, drone_id, created_at)
      VALUES (${entryId}::uuid, ${actorKey(principal)}, ${s.drone?.id ?? null}::uuid, ${now})
      ON CONFLICT DO NOTHING RETURNING entry_id::text`;
    const newlyAcked = inserted.length > 0;
    if (newlyAcked && s.drone && entry.authorDroneId && entry.authorDroneId !== s.drone.id) {
      await insertNotifications(
        tx,
        cubeId,
        [
          {
            recipientDroneId: entry.authorDroneId,
            kind: "ack",
            text: `[ACK] ${preview(entry.message)}`,
            entryId,
            actorDroneId: s.drone.id,
            actorRoleName: s.drone.roleName,
          },
        ],
        now,
      );
    }
    return { newlyAcked, entry: await entryNow(tx, entry) };
  });
  if (result.newlyAcked) ring(deps, [cubeId], ACTIVITY);
  return result;
}

/** Claims an entry exclusively: the first claimant wins; one CLAIM notification per audience drone. */
export async function claimEntry(deps: CubeDeps, principal: Principal, cubeId: string, entryId: string) {
  const { s, entry } = await visibleEntry(deps, principal, cubeId, entryId, "claiming");
  await deps.guard.admit(300);
  const now = deps.clock.now();
  const key = actorKey(principal);
  const label = await labelOf(deps.prisma, principal, s);
  const result = await inTransaction(deps.prisma, async (tx) => {
    const inserted = await tx.$queryRaw<{ entry_id: string }[]>`
      INSERT INTO claims (entry_id, holder_principal_id, holder_drone_id, holder_label, claimed_at)
      VALUES (${entryId}::uuid, ${key}, ${s.drone?.id ?? null}::uuid, ${label}, ${now})
      ON CONFLICT (entry_id) DO NOTHING RETURNING entry_id::text`;
    let outcome: "claimed" | "held" | "other";
    if (inserted.length > 0) {
      outcome = "claimed";
      await insertNotifications(tx, cubeId, notes(await claimAudience(tx, entry, s.drone?.id), "claim", entry, s), now);
    } else {
      const holder = await tx.claim.findUnique({ where: { entryId } });
      outcome = holder?.holderPrincipalId === key ? "held" : "other";
    }
    const claim = (await tx.claim.findUnique({ where: { entryId } })) as Claim;
    return { outcome, claim, entry: await entryNow(tx, entry) };
  });
  if (result.outcome === "claimed") ring(deps, [cubeId], ACTIVITY);
  return result;
}

/** Releases the caller's claim; the audience (minus the releaser) is told. */
export async function releaseClaim(deps: CubeDeps, principal: Principal, cubeId: string, entryId: string) {
  const { s, entry } = await visibleEntry(deps, principal, cubeId, entryId, "releasing");
  const now = deps.clock.now();
  const key = actorKey(principal);
  const result = await inTransaction(deps.prisma, async (tx) => {
    const deleted = await tx.$queryRaw<{ entry_id: string }[]>`
      DELETE FROM claims WHERE entry_id = ${entryId}::uuid AND holder_principal_id = ${key}
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
      claim = await tx.claim.findUnique({ where: { entryId } });
      outcome = claim ? "other" : "none";
    }
    return { outcome, claim, entry: await entryNow(tx, entry) };
  });
  if (result.outcome === "released") ring(deps, [cubeId], ACTIVITY);
  return result;
}
