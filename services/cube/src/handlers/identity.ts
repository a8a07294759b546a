import type { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { CubeAccess } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import {
  constantTimeEquals,
  InvalidArgumentError,
  PermissionDeniedError,
  parseToken,
  type ServiceImpl,
  UnauthenticatedError,
} from "@unimatrix/service-kit";
import { authenticatedToWire, clientToWire, grantToWire, tenantToWire, userToWire } from "../convert";
import { type AccessLevel, clientOf, tenantOf, userTenantOf } from "../rules/access";
import { decodePageToken, encodePageToken, enumValue, name, optionalUuid, pageSize, uuid } from "../rules/request";
import { listCubeGrants, revokeCubeGrant, setCubeGrant } from "../store/grants";
import {
  createTenant,
  issueClient,
  issueUserToken,
  listClients,
  resolveToken,
  revokeClient,
  rotateClient,
} from "../store/identity";
import type { CubeDeps } from "./deps";

const ACCESS_LEVELS = [CubeAccess.READ, CubeAccess.WRITE, CubeAccess.MANAGE] as const;

/** IdentityService: tenants, users, clients, grants and token authentication. */
export function identityHandlers(
  deps: CubeDeps,
  operatorToken: string | undefined,
): ServiceImpl<typeof IdentityService> {
  return {
    async createTenant(request, ctx) {
      const tenantName = name("name", request.name, 200);
      const adminName = name("admin_display_name", request.adminDisplayName, 200);
      const principal = await ctx.principal();
      if (principal.kind !== "operator") throw new PermissionDeniedError("only the operator creates tenants");
      const { tenant, user, token } = await createTenant(deps, tenantName, adminName);
      return { tenant: tenantToWire(tenant), adminUser: userToWire(user), adminUserToken: token };
    },

    async issueUserToken(request, ctx) {
      const userId = optionalUuid("user_id", request.userId);
      if (userId && request.displayName !== "")
        throw new InvalidArgumentError("display_name", "must be empty when user_id is set");
      const displayName = userId ? undefined : name("display_name", request.displayName, 200);
      const tenantId = userTenantOf(await ctx.principal());
      const { user, token } = await issueUserToken(deps, tenantId, { userId, displayName });
      return { user: userToWire(user), token };
    },

    async issueClient(request, ctx) {
      const clientName = name("name", request.name, 200);
      const tenantId = userTenantOf(await ctx.principal());
      const { client, token } = await issueClient(deps, tenantId, clientName);
      return { client: clientToWire(client), token };
    },

    async rotateClientCredential(request, ctx) {
      const clientId = uuid("client_id", request.clientId);
      const principal = await ctx.principal();
      const tenantId = tenantOf(principal);
      if (principal.kind !== "user" && !(principal.kind === "client" && principal.subjectId === clientId))
        throw new PermissionDeniedError("only users or the client itself rotate a credential");
      const { client, token, revoked } = await rotateClient(deps, tenantId, clientId);
      return { client: clientToWire(client), token, revokedSessionCount: revoked };
    },

    async revokeClient(request, ctx) {
      const clientId = uuid("client_id", request.clientId);
      const tenantId = userTenantOf(await ctx.principal());
      return { client: clientToWire(await revokeClient(deps, tenantId, clientId)) };
    },

    async listClients(request, ctx) {
      const size = pageSize(request.pageSize);
      const principal = await ctx.principal();
      const tenantId = tenantOf(principal);
      const scope = `clients:${request.includeRevoked}`;
      const offset = decodePageToken(request.pageToken, scope);
      const own = clientOf(principal);
      if (principal.kind !== "user" && principal.kind !== "client")
        throw new PermissionDeniedError("only users and clients list clients");
      const rows = await listClients(deps, tenantId, { own, includeRevoked: request.includeRevoked }, offset, size);
      return {
        clients: rows.slice(0, size).map(clientToWire),
        nextPageToken: rows.length > size ? encodePageToken(offset + size, scope) : "",
      };
    },

    async setCubeGrant(request, ctx) {
      const clientId = uuid("client_id", request.clientId);
      const cubeId = uuid("cube_id", request.cubeId);
      const access = enumValue("access", request.access, ACCESS_LEVELS);
      const grant = await setCubeGrant(deps, await ctx.principal(), clientId, cubeId, access as AccessLevel);
      return { grant: grantToWire(grant) };
    },

    async revokeCubeGrant(request, ctx) {
      const clientId = uuid("client_id", request.clientId);
      const cubeId = uuid("cube_id", request.cubeId);
      return { removed: await revokeCubeGrant(deps, await ctx.principal(), clientId, cubeId) };
    },

    async listCubeGrants(request, ctx) {
      const clientId = optionalUuid("client_id", request.clientId);
      const cubeId = optionalUuid("cube_id", request.cubeId);
      const size = pageSize(request.pageSize);
      const scope = `grants:${clientId ?? ""}:${cubeId ?? ""}`;
      const offset = decodePageToken(request.pageToken, scope);
      const rows = await listCubeGrants(deps, await ctx.principal(), { clientId, cubeId }, offset, size);
      return {
        grants: rows.slice(0, size).map(grantToWire),
        nextPageToken: rows.length > size ? encodePageToken(offset + size, scope) : "",
      };
    },

    async authenticate(request) {
      if (request.token === "") throw new InvalidArgumentError("token", "must not be empty");
      const parsed = parseToken(request.token);
      const checkedAt = deps.clock.now();
      if (parsed?.kind === "operator") {
        if (operatorToken && constantTimeEquals(request.token, operatorToken))
          return authenticatedToWire("operator", checkedAt);
        throw new UnauthenticatedError("invalid credential");
      }
      const resolved = parsed ? await resolveToken(deps, parsed) : null;
      if (!resolved) throw new UnauthenticatedError("invalid credential");
      return authenticatedToWire(resolved, checkedAt);
    },
  };
}
