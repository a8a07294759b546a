/**
 * ReadUnread: what a drone may see since its inbox position; advances the position (not when peeking).
 * With `confirmThrough` (an earlier peek's cursor whose items a hook showed) the position first
 * moves forward to it and those items' receipts turn delivered (HOOK).
 *
 * Without a confirmation no lock is held: the position is read, the items after it scanned, and
 * the position moved only if it still stands where it was read (a compare-and-set), so of two
 * concurrent reads of one drone one moves it and the other reads again: each item is returned
 * once, in three round trips instead of a transaction's seven. A read that keeps losing, and every
 * confirmation, takes the transaction. Lock order there: the drone row (`FOR UPDATE`: concurrent
 * unread reads of one drone queue) → the confirmed items' receipts.
 */

import type { Principal } from "@unimatrix/service-kit/auth";
import { FailedPreconditionError, InvalidArgumentError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { READ } from "../rules/access";
import { decodeCursor } from "../rules/cursor";
import { type Viewer, viewerOf } from "../rules/visibility";
import { requireAccess } from "../store/access";
import { inTransaction, type Tx } from "../store/prisma";
import type { ActivityRow } from "../store/rows";
import { advanceInbox, inboxOf, lockInbox, moveInbox } from "../tables/drones";
import { headOf, type ItemPage, loadItems, scanVisible } from "../tables/entries";
import { markDeliveredMany, markRead } from "../tables/receipts";

/** Most items one confirmation marks delivered (a peek returns at most 500). */
const CONFIRM_LIMIT = 500;

/** The entries whose receipts a shown item delivers: the entry itself, or a reply a notification names. */
function deliveredEntries(rows: readonly ActivityRow[]): string[] {
  return rows.flatMap((row) =>
    row.itemType === "entry" ? [row.id] : row.notificationKind === "reply" && row.entryId ? [row.entryId] : [],
  );
}

/** What a drone may see since its inbox position, advancing the position past it unless `peek`. No effects. */
export async function readUnread(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  limit: number,
  peek = false,
  confirmThrough = "",
): Promise<OpResult<ItemPage>> {
  if (principal.kind !== "drone-session") {
    throw new FailedPreconditionError("only drone sessions have an inbox");
  }
  const through = confirmThrough === "" ? undefined : decodeCursor("confirm_through", cubeId, confirmThrough);
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "reading");
  const viewer = viewerOf(s);
  const unlocked =
    through === undefined ? await readUnlocked(deps, principal.droneId, cubeId, viewer, limit, peek) : undefined;
  if (unlocked) return { result: unlocked, effects: {} };
  const result = await inTransaction(deps.prisma, async (tx) => {
    let after = await lockInbox(tx, principal.droneId);
    if (through !== undefined && through > after) after = await confirm(tx, deps, principal.droneId, through, after);
    const page = await scanVisible(tx, cubeId, after, viewer, limit);
    if (!peek && page.last !== after) await advanceInbox(tx, principal.droneId, page.last);
    return { items: await loadItems(tx, page.rows), after, last: page.last, hasMore: page.hasMore };
  });
  return { result, effects: {} };

  /** Moves the inbox to `through` and marks what lay between delivered (HOOK) and read; answers the new position. */
  async function confirm(tx: Tx, d: CubeDeps, droneId: string, to: bigint, from: bigint): Promise<bigint> {
    if (to > (await headOf(tx, cubeId)))
      throw new InvalidArgumentError("confirm_through", "is ahead of the cube's activity");
    const shown = await scanVisible(tx, cubeId, from, viewerOf(s), CONFIRM_LIMIT);
    const rows = shown.rows.filter((row) => row.position <= to);
    const now = d.clock.now();
    const entries = deliveredEntries(rows);
    await markDeliveredMany(
      tx,
      entries.map((entryId) => ({ entryId, droneId, via: "hook" as const, at: now })),
    );
    await markRead(
      tx,
      droneId,
      rows.filter((row) => row.itemType === "entry").map((row) => row.id),
      now,
    );
    await advanceInbox(tx, droneId, to);
    return to;
  }
}

/** Tries before the locked read takes over: a read that loses this often to others of the same drone queues instead. */
const UNLOCKED_TRIES = 3;

/**
 * The read without a lock: the position, the visible items after it, then the position moved by
 * compare-and-set (beside loading the items' acks and claims). Undefined when every try lost to
 * another read of the drone.
 */
async function readUnlocked(
  deps: CubeDeps,
  droneId: string,
  cubeId: string,
  viewer: Viewer,
  limit: number,
  peek: boolean,
): Promise<ItemPage | undefined> {
  for (let attempt = 0; attempt < UNLOCKED_TRIES; attempt++) {
    const after = await inboxOf(deps.fast, droneId);
    const page = await scanVisible(deps.prisma, cubeId, after, viewer, limit);
    const stays = peek || page.last === after;
    const [moved, items] = await Promise.all([
      stays || moveInbox(deps.fast, droneId, after, page.last),
      loadItems(deps.prisma, page.rows),
    ]);
    if (moved) return { items, after, last: page.last, hasMore: page.hasMore };
  }
  return undefined;
}
