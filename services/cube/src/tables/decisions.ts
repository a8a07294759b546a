/** Rows of `decisions`. Row SQL only. */
import type { PrismaClient, Tx } from "../store/prisma";
import type { Decision } from "../store/rows";

/** Inserts a decision. */
export function insertDecision(db: PrismaClient | Tx, decision: Decision): Promise<Decision> {
  return db.decision.create({ data: decision });
}

/** A cube's decisions newest first, `limit + 1` after `offset`. */
export function decisionsOf(db: PrismaClient | Tx, cubeId: string, offset: number, limit: number) {
  return db.decision.findMany({
    where: { cubeId },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    skip: offset,
    take: limit + 1,
  });
}
