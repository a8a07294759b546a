/**
 * AttachSeat (a client principal): reuse a saved session, reattach a prior drone, or create a drone.
 *
 * Lock order: creating — the prior drone row (`FOR UPDATE`) or the role row (seat counter) → the
 * new session → the drone's HELD claims; reusing — the session row → the drone's HELD claims → the
 * drone row. One transaction either way.
 */

import { issueToken, type Principal, parseToken, sha256, verifySecret } from "@unimatrix/service-kit/auth";
import { FailedPreconditionError, NotFoundError, PermissionDeniedError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { READ } from "../rules/access";
import { requireAccess } from "../store/access";
import { authTag } from "../store/auth-cache";
import { inTransaction } from "../store/prisma";
import type { Drone, DroneRow, DroneSession, Role } from "../store/rows";
import { renewHeldClaims } from "../tables/claims";
import { droneView } from "../tables/drones";
import {
  droneById,
  insertSession,
  liveSessionCount,
  lockClientDrone,
  newDrone,
  reseat,
  resolveRole,
  sessionByLookup,
  setDroneMachine,
  setSessionMachine,
  touchSeat,
} from "../tables/seats";

/** What AttachSeat asks for. */
export interface AttachRequest {
  readonly cubeId: string;
  readonly roleId?: string;
  readonly sessionToken?: string;
  readonly priorDroneId?: string;
  readonly hostname: string;
  /** The presence machine the session runs on (notices travel over its Link); unset clears it. */
  readonly machineId?: string;
}

/** What AttachSeat answers. */
export type AttachResult =
  | { outcome: "rejected" }
  | {
      outcome: "created" | "reused";
      drone: DroneRow;
      session: DroneSession;
      token?: string;
      /** The cube's last position when the attach began (a subscription after it misses nothing new). */
      head: bigint;
    };

/** Attaches a seat for a client; effects: a reattached drone's cached access is dropped (its role may change). */
export async function attachSeat(
  deps: CubeDeps,
  principal: Principal,
  request: AttachRequest,
): Promise<OpResult<AttachResult>> {
  if (principal.kind !== "client") throw new PermissionDeniedError("only clients attach seats");
  const clientId = principal.subjectId;
  const { cubeId } = request;
  const { cube } = await requireAccess(deps.prisma, principal, cubeId, READ, "attaching a seat");
  const head = BigInt(cube.head);
  const role = await resolveRole(deps.prisma, cubeId, request.roleId);
  // Presence answers whether the machine is the caller's (before anything is written).
  if (request.machineId) await deps.machines?.requireOwn(principal, request.machineId);
  const now = deps.clock.now();
  if (request.sessionToken !== undefined) {
    const reused = await reuseSession(deps, clientId, cubeId, role, request, now);
    return { result: reused.outcome === "rejected" ? reused : { ...reused, head }, effects: {} };
  }
  await deps.guard.admit(request.hostname.length + 600);
  const issued = issueToken("drone");
  const expiresAt = new Date(now.getTime() + deps.config.sessionTtlMs);
  const machineId = request.machineId ?? null;
  const result = await inTransaction(deps.prisma, async (tx) => {
    let drone: Drone;
    if (request.priorDroneId) {
      const prior = await lockClientDrone(tx, cubeId, clientId, request.priorDroneId);
      if (!prior) throw new NotFoundError("prior drone not found");
      if (prior.evictedAt) throw new FailedPreconditionError("prior_drone_id was evicted");
      if ((await liveSessionCount(tx, prior.id, now)) > 0)
        throw new FailedPreconditionError("prior_drone_id is occupied by a live session");
      drone = await reseat(tx, prior.id, role.id, request.hostname, machineId, now);
    } else {
      drone = await newDrone(tx, principal.tenantId, clientId, cubeId, role, request.hostname, now);
      if (request.machineId) drone = await setDroneMachine(tx, drone.id, request.machineId);
    }
    const session = await insertSession(tx, {
      droneId: drone.id,
      cubeId,
      clientId,
      tenantId: principal.tenantId,
      lookupDigest: issued.lookupDigest,
      verifierDigest: issued.verifierDigest,
      createdAt: now,
      expiresAt,
      machineId,
    });
    await renewHeldClaims(tx, drone.id, now, deps.config.claimLeaseSeconds);
    return { drone, session };
  });
  const view = await droneView(deps.prisma, result.drone, now);
  return {
    result: { outcome: "created", drone: view, session: result.session, token: issued.token, head },
    // A reattached drone may have a new role (what it may broadcast and see).
    effects: request.priorDroneId ? { authTags: [authTag.drone(result.drone.id)] } : {},
  };
}

async function reuseSession(
  deps: CubeDeps,
  clientId: string,
  cubeId: string,
  role: Role,
  request: AttachRequest,
  now: Date,
): Promise<AttachResult | { outcome: "reused"; drone: DroneRow; session: DroneSession }> {
  const parsed = parseToken(request.sessionToken ?? "");
  if (parsed?.kind !== "drone") return { outcome: "rejected" };
  const session = await sessionByLookup(deps.prisma, sha256(parsed.lookup));
  if (!session || !verifySecret(parsed.secret, session.verifierDigest)) return { outcome: "rejected" };
  const drone = await droneById(deps.prisma, session.droneId);
  const valid =
    drone !== null &&
    session.clientId === clientId &&
    session.cubeId === cubeId &&
    session.revokedAt === null &&
    session.expiresAt > now &&
    drone.evictedAt === null &&
    drone.roleId === role.id &&
    (request.priorDroneId === undefined || request.priorDroneId === drone.id);
  if (!valid) return { outcome: "rejected" };
  const touched = await inTransaction(deps.prisma, async (tx) => {
    const machineId = request.machineId ?? null;
    if (session.machineId !== machineId) await setSessionMachine(tx, session.id, machineId);
    await renewHeldClaims(tx, drone.id, now, deps.config.claimLeaseSeconds);
    return touchSeat(tx, drone.id, machineId, now);
  });
  return { outcome: "reused", drone: await droneView(deps.prisma, touched, now), session };
}
