/**
 * AppendEntry without a parent: a post, a DIRECT post, a question to the human seats. A reply is
 * ops/reply.ts.
 *
 * One statement, no transaction: the author drone row → its HELD claims → the cube row (the
 * position) → the entry, its receipts and its machines' notices (tables/entries `insertEntry`).
 */
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import type { NewEntry } from "../rules/entry";
import { type ItemRow, NO_REACTIONS } from "../store/rows";
import { addressees, insertEntry, postRow } from "../tables/entries";
import { poster } from "./steps/poster";

/** Appends an entry: position taken under the cube lock; effects: the cube's doorbell and the notices' machines. */
export async function appendEntry(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  input: NewEntry,
): Promise<OpResult<ItemRow>> {
  // Access from the replica's auth cache (no round trip in the common case); the insert is the one statement.
  const { view, now, due, author } = await poster(deps, principal, cubeId, input);
  const recipients = await addressees(deps.prisma, cubeId, input, now, view.drone?.id);
  const row = postRow(cubeId, author, input, recipients, null, now);
  const inserted = await insertEntry(deps.fast, row, input.visibility === "direct" ? recipients : [], due);
  row.position = inserted.position;
  return {
    result: { row, state: NO_REACTIONS },
    effects: {
      activity: [cubeId],
      through: { cubeId, position: inserted.position },
      noticeMachines: inserted.noticeMachines,
    },
  };
}
