import { timestampMs } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { PrincipalKind } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import type { LinkSessionBound } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { createClient, type TypedClient } from "@unimatrix/service-kit/grpc";

/** The drone a session token acts as. */
export interface DroneIdentity {
  readonly droneId: string;
  readonly cubeId: string;
  /** When the token expires (ms since epoch); 0 when unknown. */
  readonly expiresAt: number;
  /** True when presence tied the drone session to this machine (the Link's `session`). */
  readonly bound?: boolean;
}

/** Resolves a host session's drone token (and the drone id it declares, if any) to its drone. */
export interface DroneResolver {
  resolve(droneToken: string, declaredDroneId?: string): Promise<DroneIdentity>;
  close(): void;
}

/** The resolvers' refusal of a token that names no drone session. */
export const NOT_A_DRONE_TOKEN = "the token is not a drone session token";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Verifies the token with cube's `IdentityService.Authenticate` (which needs no caller
 * principal): only a live DRONE_SESSION token names a drone.
 */
export function cubeResolver(target: string, credentials?: grpc.ChannelCredentials): DroneResolver {
  const client: TypedClient<typeof IdentityService> = createClient(IdentityService, target, credentials);
  return {
    async resolve(droneToken) {
      const { principal } = await client.authenticate({ token: droneToken }, { deadline: 5_000 });
      if (principal?.kind !== PrincipalKind.DRONE_SESSION || !principal.droneId) throw new Error(NOT_A_DRONE_TOKEN);
      return {
        droneId: principal.droneId,
        cubeId: principal.cubeId,
        expiresAt: principal.expiresAt ? timestampMs(principal.expiresAt) : 0,
      };
    },
    close: () => client.close(),
  };
}

/**
 * With no cube target, the daemon takes the drone id the session declares (UNIMATRIX_DRONE_ID):
 * the door is owner-only, so only the machine owner's own processes can declare one. The token
 * is still required, so a session that holds none is not tied.
 */
export function declaredResolver(): DroneResolver {
  return {
    async resolve(droneToken, declaredDroneId) {
      if (!droneToken.startsWith("umx_drone_")) throw new Error(NOT_A_DRONE_TOKEN);
      if (!declaredDroneId || !UUID.test(declaredDroneId))
        throw new Error("no cube target is configured: the session must declare its drone id (UNIMATRIX_DRONE_ID)");
      return { droneId: declaredDroneId, cubeId: "", expiresAt: 0 };
    },
    close: () => {},
  };
}

/** What the link resolver needs of the presence link. */
export interface SessionBinder {
  readonly linked: boolean;
  bindSession(sessionToken: string, unbind: boolean): Promise<LinkSessionBound>;
}

/**
 * Ties the session to this machine through the presence link (presence asks cube, which checks
 * the token): a live token answers its drone, cube and expiry and is `bound`; NOT_FOUND or
 * INVALID_ARGUMENT (no live drone session has it) is a dead token. With the link down, or
 * presence unable to ask cube, the `fallback` resolver answers (cube directly, or the declared
 * drone id) and the session is not bound yet: the daemon ties it when the link is back.
 */
export function linkResolver(link: SessionBinder, fallback: DroneResolver): DroneResolver {
  return {
    async resolve(droneToken, declaredDroneId) {
      if (!droneToken.startsWith("umx_drone_")) throw new Error(NOT_A_DRONE_TOKEN);
      if (link.linked) {
        const answer = await link.bindSession(droneToken, false).catch(() => undefined);
        if (answer?.code === grpc.status.OK)
          return {
            droneId: answer.droneId,
            cubeId: answer.cubeId,
            expiresAt: Number(answer.expiresAtMs),
            bound: true,
          };
        if (answer?.code === grpc.status.NOT_FOUND || answer?.code === grpc.status.INVALID_ARGUMENT)
          throw new Error(NOT_A_DRONE_TOKEN);
      }
      return { ...(await fallback.resolve(droneToken, declaredDroneId)), bound: false };
    },
    close: () => fallback.close(),
  };
}
