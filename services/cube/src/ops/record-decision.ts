/**
 * RecordDecision: a decision of the cube, optionally about a visible entry.
 *
 * Lock order: none (one insert, no transaction).
 */

import { randomUUID } from "node:crypto";
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { authorPrincipalId, WRITE } from "../rules/access";
import type { EntryRef } from "../rules/entry";
import { requireAccess } from "../store/access";
import type { Decision } from "../store/rows";
import { insertDecision } from "../tables/decisions";
import { visibleEntry } from "../tables/entries";
import { labelOf } from "../tables/principals";

/** Records a decision. Requires WRITE; a named entry must be visible in this cube. No effects. */
export async function recordDecision(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  input: { title: string; rationale: string; entry?: EntryRef },
): Promise<OpResult<Decision>> {
  const s = await requireAccess(deps.prisma, principal, cubeId, WRITE, "recording decisions");
  const entry = input.entry ? await visibleEntry(deps.prisma, s, cubeId, input.entry) : undefined;
  await deps.guard.admit(Buffer.byteLength(input.title) + Buffer.byteLength(input.rationale) + 300);
  const decision = await insertDecision(deps.prisma, {
    id: randomUUID(),
    cubeId,
    authorDroneId: s.drone?.id ?? null,
    authorPrincipalId: authorPrincipalId(principal),
    authorPrincipalKind: principal.kind,
    authorLabel: await labelOf(deps.prisma, principal, s.drone),
    title: input.title,
    rationale: input.rationale,
    entryId: entry?.id ?? null,
    createdAt: deps.clock.now(),
  });
  return { result: decision, effects: {} };
}
