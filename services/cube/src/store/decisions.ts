import { randomUUID } from "node:crypto";
import { NotFoundError } from "@unimatrix/service-kit";
import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import { authorPrincipalId, READ, WRITE } from "../rules/access";
import { viewerOf, visibleTo } from "../rules/visibility";
import { labelOf } from "../tables/principals";
import { requireAccess } from "./access";
import type { Decision } from "./rows";

/** Records a decision. Requires WRITE; a named entry must be visible in this cube. */
export async function recordDecision(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  input: { title: string; rationale: string; entryId?: string },
): Promise<Decision> {
  const s = await requireAccess(deps.prisma, principal, cubeId, WRITE, "recording decisions");
  if (input.entryId) {
    const entry = await deps.prisma.activityItem.findFirst({ where: { id: input.entryId, cubeId, itemType: "entry" } });
    if (!entry || !visibleTo(viewerOf(s), entry)) throw new NotFoundError("entry not found");
  }
  await deps.guard.admit(Buffer.byteLength(input.title) + Buffer.byteLength(input.rationale) + 300);
  return deps.prisma.decision.create({
    data: {
      id: randomUUID(),
      cubeId,
      authorDroneId: s.drone?.id ?? null,
      authorPrincipalId: authorPrincipalId(principal),
      authorPrincipalKind: principal.kind,
      authorLabel: await labelOf(deps.prisma, principal, s.drone),
      title: input.title,
      rationale: input.rationale,
      entryId: input.entryId ?? null,
      createdAt: deps.clock.now(),
    },
  });
}

/** Decisions newest first. Requires READ. */
export async function listDecisions(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  offset: number,
  limit: number,
): Promise<Decision[]> {
  await requireAccess(deps.prisma, principal, cubeId, READ, "listing decisions");
  return deps.prisma.decision.findMany({
    where: { cubeId },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    skip: offset,
    take: limit + 1,
  });
}
