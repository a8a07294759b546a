import type { Principal } from "@unimatrix/service-kit/auth";
import { NotFoundError } from "@unimatrix/service-kit/errors";
import type { RawQuery } from "@unimatrix/service-kit/store";
import type { CubeDeps } from "../handlers/deps";
import { READ, WRITE } from "../rules/access";
import { staleAtFor } from "../rules/lease";
import { notificationText } from "../rules/preview";
import { answersQuestion } from "../rules/questions";
import { type Viewer, viewerOf, visibleTo } from "../rules/visibility";
import { type CubeStanding, requireAccess } from "./access";
import { loadItems } from "./activity";
import { insertNotifications } from "./notifications";
import type { PrismaClient, Tx } from "./prisma";
import { openReceipts } from "./receipts";
import type { ActivityRow, ItemRow } from "./rows";

/** The most replies one ReadThread scans (a thread is a conversation, not a log). */
export const MAX_THREAD_SCAN = 5000;

/** The entry a reply replies to: a visible entry of the cube, else NOT_FOUND naming `reply_to_entry_id`. */
export async function replyTarget(
  deps: CubeDeps,
  s: Pick<CubeStanding, "access" | "drone">,
  cubeId: string,
  entryId: string,
): Promise<ActivityRow> {
  const parent = await deps.prisma.activityItem.findFirst({ where: { id: entryId, cubeId, itemType: "entry" } });
  if (!parent || !visibleTo(viewerOf(s), parent)) throw new NotFoundError("reply_to_entry_id: entry not found");
  return parent;
}

/** Viewers of the given drones of a cube (evicted drones are left out: they see nothing). */
export async function droneViewers(db: PrismaClient | Tx, cubeId: string, droneIds: readonly string[]) {
  if (droneIds.length === 0) return [];
  const rows = await db.$queryRaw<{ id: string; participant: boolean; all_direct: boolean }[]>`
    SELECT d.id::text, (c.revoked_at IS NULL AND COALESCE(g.access, 0) >= ${WRITE}) AS participant,
           r.receives_all_direct AS all_direct
    FROM drones d
    JOIN roles r ON r.id = d.role_id
    JOIN clients c ON c.id = d.client_id
    LEFT JOIN cube_grants g ON g.client_id = d.client_id AND g.cube_id = d.cube_id
    WHERE d.cube_id = ${cubeId}::uuid AND d.id = ANY(${[...droneIds]}::uuid[]) AND d.evicted_at IS NULL`;
  return rows.map((r): Viewer & { kind: "drone" } => ({
    kind: "drone",
    droneId: r.id,
    participant: r.participant,
    allDirect: r.all_direct,
  }));
}

/**
 * After a reply is inserted (same transaction): REPLY to the thread's author and participants
 * (drones that posted in it) who can see the reply, except its author, coalesced; a receipt for
 * each of them; and the reply answers the question(s) it replies to when its author is a user or a
 * human-seat drone.
 */
export async function afterReply(
  deps: CubeDeps,
  tx: Tx,
  s: Pick<CubeStanding, "access" | "drone">,
  principal: Principal,
  reply: ActivityRow,
  parent: ActivityRow,
): Promise<void> {
  const rootId = reply.threadRootEntryId as string;
  await tx.$executeRaw`UPDATE activity_items SET reply_count = reply_count + 1 WHERE id = ${rootId}::uuid`;
  const authors = await tx.$queryRaw<{ id: string }[]>`
    SELECT DISTINCT author_drone_id::text AS id FROM activity_items
    WHERE cube_id = ${reply.cubeId}::uuid AND item_type = 'entry' AND author_drone_id IS NOT NULL
      AND (id = ${rootId}::uuid OR thread_root_entry_id = ${rootId}::uuid)`;
  // A DIRECT reply's recipients get the entry itself (and its receipt and notice); a REPLY
  // notification on top would reach their harness twice.
  const addressed = new Set(reply.recipientDroneIds);
  const candidates = authors.map((a) => a.id).filter((id) => id !== reply.authorDroneId && !addressed.has(id));
  const audience = (await droneViewers(tx, reply.cubeId, candidates))
    .filter((viewer) => visibleTo(viewer, reply))
    .map((viewer) => viewer.droneId)
    .sort();
  const text = notificationText("reply", reply.message);
  await insertNotifications(
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
  if (answersQuestion({ principalKind: principal.kind, humanSeat: s.drone?.humanSeat ?? false })) {
    await tx.$executeRaw`
      UPDATE activity_items SET answer_entry_id = ${reply.id}::uuid
      WHERE id = ANY(${[parent.id, rootId]}::uuid[]) AND question AND answer_entry_id IS NULL`;
  }
}

/**
 * A drone's read (ReadActivity, ReadUnread, ReadThread) in one statement: the first read of the
 * returned entries it has receipts for, and the renewal of its held claims (its activity).
 */
export async function noteDroneRead(
  db: RawQuery,
  droneId: string,
  entryIds: readonly string[],
  now: Date,
  leaseSeconds: number,
): Promise<void> {
  await db.$queryRaw`
    WITH c AS (
      UPDATE claims SET renewed_at = ${now}, stale_at = ${staleAtFor(now, leaseSeconds)}
      WHERE holder_drone_id = ${droneId}::uuid AND state = 'held' AND renewed_at < ${now}
      RETURNING 1
    ), r AS (
      -- After the claims (every path locks claims before receipts).
      UPDATE receipts SET read_at = ${now}
      WHERE drone_id = ${droneId}::uuid AND entry_id = ANY(${[...entryIds]}::uuid[]) AND read_at IS NULL
        AND (SELECT count(*) FROM c) >= 0
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM r) AS read, (SELECT count(*) FROM c) AS renewed`;
}

/** After a drone read items: its receipts and claims (see noteDroneRead). Other principals: nothing. */
export async function afterRead(deps: CubeDeps, principal: Principal, items: readonly ItemRow[]): Promise<void> {
  if (principal.kind !== "drone-session") return;
  const entryIds = items.filter((i) => i.row.itemType === "entry").map((i) => i.row.id);
  await noteDroneRead(deps.fast, principal.droneId, entryIds, deps.clock.now(), deps.config.claimLeaseSeconds);
}

/** A thread page: the root (absent when the caller cannot see it) and a page of visible replies. */
export interface ThreadPage {
  readonly root: ItemRow | null;
  readonly replies: ItemRow[];
}

/** A thread by its root or any reply: the root and `limit + 1` visible replies after `offset`, oldest first. */
export async function readThread(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  entryId: string,
  offset: number,
  limit: number,
): Promise<ThreadPage> {
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "reading");
  const viewer = viewerOf(s);
  const entry = await deps.prisma.activityItem.findFirst({ where: { id: entryId, cubeId, itemType: "entry" } });
  if (!entry || !visibleTo(viewer, entry)) throw new NotFoundError("entry not found");
  const rootId = entry.threadRootEntryId ?? entry.id;
  const root =
    rootId === entry.id
      ? entry
      : await deps.prisma.activityItem.findFirst({ where: { id: rootId, cubeId, itemType: "entry" } });
  const replies = await deps.prisma.activityItem.findMany({
    where: { cubeId, threadRootEntryId: rootId, itemType: "entry" },
    orderBy: { position: "asc" },
    take: MAX_THREAD_SCAN,
  });
  const page = replies.filter((r) => visibleTo(viewer, r)).slice(offset, offset + limit + 1);
  const shownRoot = root && visibleTo(viewer, root) ? root : null;
  const loaded = await loadItems(deps.prisma, shownRoot ? [shownRoot, ...page] : page);
  const result = { root: shownRoot ? (loaded[0] as ItemRow) : null, replies: shownRoot ? loaded.slice(1) : loaded };
  await afterRead(deps, principal, [...(result.root ? [result.root] : []), ...result.replies.slice(0, limit)]);
  return result;
}

/** A question and its answer (absent while open, or when the caller cannot see it). */
export interface QuestionRow {
  readonly entry: ItemRow;
  readonly answer: ItemRow | null;
}

/** The cube's questions visible to the caller, newest first, `limit + 1` after `offset`. Requires READ. */
export async function listQuestions(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  includeAnswered: boolean,
  offset: number,
  limit: number,
): Promise<QuestionRow[]> {
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "listing questions");
  const viewer = viewerOf(s);
  const where = { cubeId, itemType: "entry", question: true, ...(includeAnswered ? {} : { answerEntryId: null }) };
  const rows =
    viewer.kind === "principal"
      ? await deps.prisma.activityItem.findMany({
          where,
          orderBy: { position: "desc" },
          skip: offset,
          take: limit + 1,
        })
      : (await deps.prisma.activityItem.findMany({ where, orderBy: { position: "desc" }, take: MAX_THREAD_SCAN }))
          .filter((r) => visibleTo(viewer, r))
          .slice(offset, offset + limit + 1);
  const answerIds = rows.flatMap((r) => (r.answerEntryId ? [r.answerEntryId] : []));
  const answers = (
    answerIds.length === 0 ? [] : await deps.prisma.activityItem.findMany({ where: { id: { in: answerIds } } })
  ).filter((a) => visibleTo(viewer, a));
  const loaded = await loadItems(deps.prisma, [...rows, ...answers]);
  const byId = new Map(loaded.map((i) => [i.row.id, i]));
  return rows.map((r) => ({
    entry: byId.get(r.id) as ItemRow,
    answer: r.answerEntryId ? (byId.get(r.answerEntryId) ?? null) : null,
  }));
}
