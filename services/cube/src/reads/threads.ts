/** ReadThread and ListQuestions: conversations of the log, as the caller may see them. */

import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import { READ } from "../rules/access";
import type { EntryRef } from "../rules/entry";
import { viewerOf, visibleTo } from "../rules/visibility";
import { requireAccess } from "../store/access";
import type { ItemRow } from "../store/rows";
import { entryOf, loadItems, visibleEntry } from "../tables/entries";

/** The most replies one ReadThread scans (a thread is a conversation, not a log). */
const MAX_THREAD_SCAN = 5000;

/** A thread page: the root (absent when the caller cannot see it) and a page of visible replies. */
export interface ThreadPage {
  readonly root: ItemRow | null;
  readonly replies: ItemRow[];
}

/**
 * A thread by its root or any reply: the root and `limit + 1` visible replies after `offset`,
 * oldest first. The caller notes a drone's read of what it returns (ops/note-read.ts).
 */
export async function readThread(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  ref: EntryRef,
  offset: number,
  limit: number,
): Promise<ThreadPage> {
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "reading");
  const viewer = viewerOf(s);
  const entry = await visibleEntry(deps.prisma, s, cubeId, ref);
  const rootId = entry.threadRootEntryId ?? entry.id;
  const root = rootId === entry.id ? entry : await entryOf(deps.prisma, cubeId, { field: "entry_id", id: rootId });
  const replies = await deps.prisma.activityItem.findMany({
    where: { cubeId, threadRootEntryId: rootId, itemType: "entry" },
    orderBy: { position: "asc" },
    take: MAX_THREAD_SCAN,
  });
  const page = replies.filter((r) => visibleTo(viewer, r)).slice(offset, offset + limit + 1);
  const shownRoot = root && visibleTo(viewer, root) ? root : null;
  const loaded = await loadItems(deps.prisma, shownRoot ? [shownRoot, ...page] : page);
  return { root: shownRoot ? (loaded[0] as ItemRow) : null, replies: shownRoot ? loaded.slice(1) : loaded };
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
