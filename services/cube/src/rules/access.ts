import type { Principal } from "@unimatrix/service-kit/auth";
import { PermissionDeniedError } from "@unimatrix/service-kit/errors";

/** Access levels, ordered: 0 none, 1 READ, 2 WRITE, 3 MANAGE (the CubeAccess enum values). */
export type AccessLevel = 0 | 1 | 2 | 3;
/** May read the cube's activity. */
export const READ = 1;
/** May post, ack, claim and record decisions: a participant. */
export const WRITE = 2;
/** May change the cube, its roles and grants. */
export const MANAGE = 3;

/** Lower-case name of an access level. */
function levelName(level: number): string {
  return ["none", "read", "write", "manage"][level] ?? "unknown";
}

/** PERMISSION_DENIED naming what needed `level` when `access` is below it. */
export function requireLevel(access: AccessLevel, level: AccessLevel, what: string): void {
  if (access < level) throw new PermissionDeniedError(`${what} requires ${levelName(level)} access to the cube`);
}

/** The tenant of a principal that may touch tenant data; PERMISSION_DENIED for the operator and other contexts' kinds. */
export function tenantOf(principal: Principal): string {
  if (principal.kind === "user" || principal.kind === "client" || principal.kind === "drone-session")
    return principal.tenantId;
  throw new PermissionDeniedError(`a ${principal.kind} principal cannot call this`);
}

/** The tenant of a user principal; PERMISSION_DENIED for every other kind. */
export function userTenantOf(principal: Principal): string {
  if (principal.kind !== "user") throw new PermissionDeniedError("only users can call this");
  return principal.tenantId;
}

/** The client id behind a principal (the client itself, or a drone session's client). */
export function clientOf(principal: Principal): string | undefined {
  if (principal.kind === "client") return principal.subjectId;
  if (principal.kind === "drone-session") return principal.clientId;
  return undefined;
}

/** The key that makes acks and claims idempotent per principal: the drone for drone sessions. */
export function actorKey(principal: Principal): string {
  return principal.kind === "drone-session" ? principal.droneId : principal.subjectId;
}

/** The principal an entry or decision is authored by: a drone session posts as its client. */
export function authorPrincipalId(principal: Principal): string {
  return principal.kind === "drone-session" ? principal.clientId : principal.subjectId;
}

/** What a drone's posture depends on. */
export interface PostureFacts {
  readonly evicted: boolean;
  readonly clientRevoked: boolean;
  /** The drone's client's grant on the drone's cube. */
  readonly access: number;
}

/** Posture: a participant is a drone not evicted, whose client is not revoked, with a grant of at least WRITE; else an observer. */
export function isParticipant(facts: PostureFacts): boolean {
  return !facts.evicted && !facts.clientRevoked && facts.access >= WRITE;
}

/** A MACHINE caller (presence signs the machine's principal for the Link it serves). */
export interface MachineCaller {
  readonly tenantId: string;
  readonly machineId: string;
}

/** The machine behind a MACHINE principal; PERMISSION_DENIED for every other kind (NoticeService). */
export function machineOf(principal: Principal): MachineCaller {
  if (principal.kind !== "machine")
    throw new PermissionDeniedError("only machine principals watch and confirm notices");
  return { tenantId: principal.tenantId, machineId: principal.subjectId };
}
