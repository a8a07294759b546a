/**
 * BindSession: a machine ties the live drone session whose token it holds to itself (what
 * AttachSeat's `machine_id` sets from the agent's side), or unties it.
 *
 * Lock order: the drone session row (`FOR UPDATE`) → its drone row. One transaction.
 */
import { parseToken } from "@unimatrix/service-kit/auth";
import { InvalidArgumentError, NotFoundError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { resolveToken } from "../reads/credentials";
import type { MachineCaller } from "../rules/access";
import { inTransaction } from "../store/prisma";
import { lockSessionMachine, setDroneMachineIf, setSessionMachine } from "../tables/seats";

/** What BindSession answers: the session's drone, cube and expiry, and whether anything changed. */
export interface BoundSession {
  readonly droneId: string;
  readonly cubeId: string;
  readonly expiresAt: Date;
  readonly changed: boolean;
}

/**
 * Ties (or, with `unbind`, unties) the drone session of `token` to the calling machine: the
 * session's and its drone's `machine_id`. Untying changes only a session tied to this machine.
 * The token is checked afresh (never from the auth cache): INVALID_ARGUMENT naming
 * `session_token` when it is no drone token, NOT_FOUND when no live session of the machine's
 * tenant has it. No effects: notices queued from now on follow the session's machine.
 */
export async function bindSession(
  deps: CubeDeps,
  machine: MachineCaller,
  token: string,
  unbind: boolean,
): Promise<OpResult<BoundSession>> {
  const parsed = parseToken(token);
  if (parsed?.kind !== "drone") throw new InvalidArgumentError("session_token", "must be a drone session token");
  const resolved = await resolveToken(deps, parsed);
  const principal = resolved?.principal;
  if (principal?.kind !== "drone-session" || principal.tenantId !== machine.tenantId || !resolved?.expiresAt)
    throw new NotFoundError("no live drone session has this token");
  const expiresAt = resolved.expiresAt;
  const result = await inTransaction(deps.prisma, async (tx) => {
    const current = await lockSessionMachine(tx, principal.subjectId);
    const target = unbind ? (current === machine.machineId ? null : current) : machine.machineId;
    if (target === current) return false;
    await setSessionMachine(tx, principal.subjectId, target);
    await setDroneMachineIf(tx, principal.droneId, unbind ? machine.machineId : null, target);
    return true;
  });
  return { result: { droneId: principal.droneId, cubeId: principal.cubeId, expiresAt, changed: result }, effects: {} };
}
