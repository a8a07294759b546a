/** Rows of `users` and `clients` as the log shows their principals. Row SQL only. */
import type { Principal } from "@unimatrix/service-kit/auth";
import type { PrismaClient, Tx } from "../store/prisma";

/** Display label of a principal: the drone label (when acting as one), user name or client name. */
export async function labelOf(db: PrismaClient | Tx, principal: Principal, drone?: { label: string }): Promise<string> {
  if (drone) return drone.label;
  if (principal.kind === "user")
    return (await db.user.findUnique({ where: { id: principal.subjectId } }))?.displayName ?? "";
  if (principal.kind === "client")
    return (await db.apiClient.findUnique({ where: { id: principal.subjectId } }))?.name ?? "";
  return "";
}
