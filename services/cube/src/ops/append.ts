/**
 * AppendEntry (a post, a DIRECT post, a reply, a question to the human seats).
 *
 * Lock order: the author drone row → its HELD claims → the cube row (the position) → the new
 * entry's receipts and notices; for a reply, then the thread root (reply count) → notification
 * marks → the cube row again (REPLY positions) → their notices → the REPLY receipts → the answered
 * questions. A post without a parent is one statement (no transaction); a reply is one transaction.
 */
import { randomUUID } from "node:crypto";
import type { Principal } from "@unimatrix/service-kit/auth";
import { InvalidArgumentError, PermissionDeniedError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { authorPrincipalId, WRITE } from "../rules/access";
import type { NewEntry } from "../rules/entry";
import { notificationText } from "../rules/preview";
import { answersQuestion } from "../rules/questions";
import { taxonomyKinds } from "../rules/taxonomy";
import { visibleTo } from "../rules/visibility";
import { type CubeStanding, requireCachedAccess } from "../store/access";
import { inTransaction, type Tx } from "../store/prisma";
import { type ActivityRow, type ItemRow, NO_REACTIONS } from "../store/rows";
import { droneViewers } from "../tables/drones";
import {
  blankEntry,
  countReply,
  insertEntry,
  liveHumanSeats,
  liveRecipients,
  markAnswered,
  threadAuthors,
  visibleEntry,
} from "../tables/entries";
import { labelOf } from "../tables/principals";
import { openReceipts } from "../tables/receipts";
import { insertNotifications } from "./steps/notify";

/** Appends an entry: position taken under the cube lock; effects: the cube's doorbell and the notices' machines. */
export async function appendEntry(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  input: NewEntry,
): Promise<OpResult<ItemRow>> {
  // Access from the replica's auth cache (no round trip in the common case); the insert is the one statement.
  const { view: pre } = await requireCachedAccess(deps, principal, cubeId, WRITE, "posting");
  if (input.visibility === "broadcast" && pre.drone && !pre.drone.canBroadcast)
    throw new PermissionDeniedError("this drone's role cannot broadcast");
  if (input.kind !== undefined && pre.taxonomyJson && !taxonomyKinds(pre.taxonomyJson).has(input.kind))
    throw new InvalidArgumentError("kind", "is not one of the cube's taxonomy kinds");
  const label = await labelOf(deps.prisma, principal, pre.drone);
  const parent = input.replyTo ? await visibleEntry(deps.prisma, pre, cubeId, input.replyTo) : null;
  const now = deps.clock.now();
  let recipients = input.recipientDroneIds;
  if (recipients.length > 0 || input.recipientLabels.length > 0) {
    recipients = await liveRecipients(deps.prisma, cubeId, recipients, input.recipientLabels);
  } else if (input.visibility === "direct" && input.askHuman) {
    recipients = (await liveHumanSeats(deps.prisma, cubeId, now)).filter((id) => id !== pre.drone?.id);
  }
  await deps.guard.admit(Buffer.byteLength(input.message) + recipients.length * 80 + 200);
  const row: ActivityRow = {
    ...blankEntry(),
    id: randomUUID(),
    cubeId,
    createdAt: now,
    authorDroneId: pre.drone?.id ?? null,
    authorPrincipalId: authorPrincipalId(principal),
    authorPrincipalKind: principal.kind,
    authorLabel: label,
    message: input.message,
    visibility: input.visibility,
    recipientDroneIds: recipients,
    kind: input.kind ?? null,
    replyToEntryId: parent?.id ?? null,
    threadRootEntryId: parent ? (parent.threadRootEntryId ?? parent.id) : null,
    expectsReply: input.expectsReply,
    question: input.askHuman,
  };
  const receipts = input.visibility === "direct" ? recipients : [];
  const machines: string[] = [];
  if (!parent) {
    const inserted = await insertEntry(deps.fast, row, receipts, deps.config.claimLeaseSeconds);
    row.position = inserted.position;
    machines.push(...inserted.noticeMachines);
  } else {
    await inTransaction(deps.prisma, async (tx) => {
      const inserted = await insertEntry(tx, row, receipts, deps.config.claimLeaseSeconds);
      row.position = inserted.position;
      machines.push(...inserted.noticeMachines, ...(await afterReply(deps, tx, pre, principal, row, parent)));
    });
  }
  return { result: { row, state: NO_REACTIONS }, effects: { activity: [cubeId], noticeMachines: machines } };
}

/**
 * After a reply is inserted (same transaction): REPLY to the thread's author and participants
 * (drones that posted in it) who can see the reply, except its author, coalesced; a receipt for
 * each of them; and the reply answers the question(s) it replies to when its author is a user or a
 * human-seat drone. Returns the machines notices were queued for.
 */
async function afterReply(
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
