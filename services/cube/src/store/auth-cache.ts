import { CREDENTIAL_CHANNEL, type Principal } from "@unimatrix/service-kit/auth";
import { type Bus, InvalidatedCache, publishInvalidation } from "@unimatrix/service-kit/bus";
import type { Clock } from "@unimatrix/service-kit/clock";
import type { Logger } from "pino";
import type { AccessLevel } from "../rules/access";
import type { ResolvedToken } from "./rows";

/** The drone a drone-session principal acts as, with what visibility depends on. */
export interface DroneActor {
  readonly id: string;
  readonly label: string;
  readonly roleName: string;
  readonly canBroadcast: boolean;
  readonly receivesAllDirect: boolean;
  /** Whether its role is a human seat (its replies answer questions). */
  readonly humanSeat: boolean;
}

/**
 * The bus channel every cube replica's auth caches listen on (payload: space-separated tags): the
 * fleet's credential-news channel, so the gateway's caches and open streams hear the same news.
 */
const AUTH_CHANNEL = CREDENTIAL_CHANNEL;
/** Most age of a cached token or access while the bus is healthy (a lost invalidation heals by then). */
const AUTH_CACHE_MAX_AGE_MS = 60_000;
/**
 * Most age while the bus is down, when invalidations can be missed: the revocation bound the edge
 * already had (`GATEWAY_AUTH_CACHE_MS` is at most 5 s).
 */
export const AUTH_CACHE_DOWN_MAX_AGE_MS = 5_000;
const MAX_ENTRIES = 20_000;

/** What the hot paths need of a principal's standing in a cube, minus the cube row (which changes on every append). */
export interface AccessView {
  readonly access: AccessLevel;
  readonly drone?: DroneActor;
  /** The cube's taxonomy (the append checks kinds against it). */
  readonly taxonomyJson: string | null;
}

/** The replica's caches of token → principal and (principal, cube) → access. */
export interface AuthCache {
  readonly tokens: InvalidatedCache<ResolvedToken>;
  readonly access: InvalidatedCache<AccessView>;
}

/** Opens both caches on the bus's `cube-auth` channel. */
export async function openAuthCache(bus: Bus, clock: Clock): Promise<AuthCache> {
  const options = {
    bus,
    channel: AUTH_CHANNEL,
    maxAgeMs: AUTH_CACHE_MAX_AGE_MS,
    downMaxAgeMs: AUTH_CACHE_DOWN_MAX_AGE_MS,
    maxEntries: MAX_ENTRIES,
    now: () => clock.now().getTime(),
  };
  const tokens = new InvalidatedCache<ResolvedToken>(options);
  const access = new InvalidatedCache<AccessView>(options);
  await Promise.all([tokens.open(), access.open()]);
  return { tokens, access };
}

/** Closes both caches. */
export async function closeAuthCache(cache: AuthCache): Promise<void> {
  await Promise.all([cache.tokens.close(), cache.access.close()]);
}

/** The tags a write names when it changes what a cached entry was read from. */
export const authTag = {
  client: (id: string) => `client:${id}`,
  drone: (id: string) => `drone:${id}`,
  session: (id: string) => `session:${id}`,
  user: (id: string) => `user:${id}`,
  cube: (id: string) => `cube:${id}`,
};

/** The tags of everything a principal's credential depends on (its client, drone, session or user). */
export function principalTags(principal: Principal): string[] {
  switch (principal.kind) {
    case "client":
      return [authTag.client(principal.subjectId)];
    case "drone-session":
      return [
        authTag.client(principal.clientId),
        authTag.drone(principal.droneId),
        authTag.session(principal.subjectId),
      ];
    case "user":
      return [authTag.user(principal.subjectId)];
    default:
      return [];
  }
}

/** The access cache's key of (principal, cube). */
export function accessKey(principal: Principal, cubeId: string): string {
  return `${principal.kind}:${principal.subjectId}:${cubeId}`;
}

/**
 * After a commit that revoked, rotated, evicted or changed grants, roles or the cube: every
 * replica drops the cached entries carrying `tags` (this one at once, the others through the bus).
 */
export async function invalidateAuth(
  deps: { bus: Bus; logger: Logger; auth: AuthCache },
  tags: Iterable<string>,
): Promise<void> {
  await publishInvalidation(deps.bus, AUTH_CHANNEL, tags, deps.logger, [deps.auth.tokens, deps.auth.access]);
}
