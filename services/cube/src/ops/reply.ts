/**
 * AppendEntry with `reply_to_*`: a reply joins its parent's thread and tells the thread.
 *
 * Lock order (one transaction): the author drone row → its HELD claims → the cube row (the reply's
 * position) → the reply's receipts and notices; then the thread root (reply count) → notification
 * marks → the cube row again (REPLY positions) → their notices → the REPLY receipts → the answered
 * questions.
 */
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import type { EntryRef, NewEntry } from "../rules/entry";
import { notificationText } from "../rules/preview";
import { answersQuestion } from "../rules/questions";
import { visibleTo } from "../rules/visibility";
import type { CubeStanding } from "../store/access";
import { inTransaction, type Tx } from "../store/prisma";
import { type ActivityRow, type ItemRow, NO_REACTIONS } from "../store/rows";
import { droneViewers } from "../tables/drones";
import {
  addressees,
  countReply,
  insertEntry,
  markAnswered,
  postRow,
  threadAuthors,
  visibleEntry,
} from "../tables/entries";
import { openReceipts } from "../tables/receipts";
import { insertNotifications } from "./steps/notify";
import { poster } from "./steps/poster";

/** Appends a reply to a visible entry; effects: the cube's doorbell and the notices' machines. */
export async function replyToEntry(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  input: NewEntry & { readonly replyTo: EntryRef },
): Promise<OpResult<ItemRow>> {
  const { view, now, due, author } = await poster(deps, principal, cubeId, input);
  const parent = await visibleEntry(deps.prisma, view, cubeId, input.replyTo);
  const recipients = await addressees(deps.prisma, cubeId, input, now, view.drone?.id);
  const row = postRow(cubeId, author, input, recipients, parent, now);
  const machines = await inTransaction(deps.prisma, async (tx) => {
    const inserted = await insertEntry(tx, row, input.visibility === "direct" ? recipients : [], due);
    row.position = inserted.position;
    return [...inserted.noticeMachines, ...(await tellThread(deps, tx, view, principal, row, parent))];
  });
  return { result: { row, state: NO_REACTIONS }, effects: { activity: [cubeId], noticeMachines: machines } };
}

/**
 * After a reply is inserted (same transaction): REPLY to the thread's author and participants
 * (drones that posted in it) who can see the reply, except its author, coalesced; a receipt for
 * each of them; and the reply answers the question(s) it replies to when its author is a user or a
 * human-seat drone. Returns the machines notices were queued for.
 */
async function tellThread(
  deps: CubeDeps,
  tx: Tx,
  s: Pick<CubeStanding, "drone">,
  principal: Principal,
  reply: ActivityRow,
  parent: ActivityRow,
): Promise<string[]> {
  const rootId = reply.threadRootEntryId as string;
  await countReply(tx, rootId);
  const authors = await threadAuthors(tx, reply.cubeId, rootId);
  // A DIRECT reply's recipients get the entry itself (and its receipt and notice); a REPLY
  // notification on top would reach their harness twice.
  const addressed = new Set(reply.recipientDroneIds);
  const candidates = authors.filter((id) => id !== reply.authorDroneId && !addressed.has(id));
  const audience = (await droneViewers(tx, reply.cubeId, candidates))
    .filter((viewer) => visibleTo(viewer, reply))
    .map((viewer) => viewer.droneId)
    .sort();
  const text = notificationText("reply", reply.message);
  const notified = await insertNotifications(
    tx,
    reply.cubeId,
    audience.map((recipientDroneId) => ({
      recipientDroneId,
      kind: "reply",
      text,
      entryId: reply.id,
      actorDroneId: s.drone?.id,
      actorRoleName: s.drone?.roleName,
      coalesceAs: `reply:${rootId}`,
    })),
    reply.createdAt,
    deps.config.notifyCoalesceSeconds,
  );
  await openReceipts(
    tx,
    reply.cubeId,
    reply.id,
    audience.map((droneId) => ({ droneId, nudge: false })),
    reply.createdAt,
    reply.recipientDroneIds.length,
  );
  if (answersQuestion({ principalKind: principal.kind, humanSeat: s.drone?.humanSeat ?? false }))
    await markAnswered(tx, [parent.id, rootId], reply.id);
  return notified.noticeMachines;
}
