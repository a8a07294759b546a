import type { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { CubeAccess } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { constantTimeEquals, credentialKey, looksLikeJwt, parseToken } from "@unimatrix/service-kit/auth";
import {
  FailedPreconditionError,
  InvalidArgumentError,
  PermissionDeniedError,
  UnauthenticatedError,
} from "@unimatrix/service-kit/errors";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import { optionalUuid, pageSize, requireUuid } from "@unimatrix/service-kit/rules";
import {
  authenticatedToWire,
  clientToWire,
  externalIdentityToWire,
  grantToWire,
  tenantToWire,
  userToWire,
} from "../convert-identity";
import type { CubeDeps } from "../deps";
import { runOp } from "../effects";
import { revokeCubeGrant, setCubeGrant } from "../ops/cube-grant";
import { createTenant, issueClient, issueUserToken, revokeClient, rotateClient } from "../ops/identity";
import { linkIdentity, unlinkIdentity } from "../ops/link-identity";
import { provisionIdentity } from "../ops/provision-identity";
import { linkedPrincipal, resolveAccessToken } from "../reads/access-tokens";
import { listClients, resolveTokenCached } from "../reads/credentials";
import { listCubeGrants } from "../reads/grants";
import { type AccessLevel, clientOf, tenantOf, userTenantOf } from "../rules/access";
import { OffsetPages } from "../rules/paging";
import { enumValue, name } from "../rules/request";

const ACCESS_LEVELS = [CubeAccess.READ, CubeAccess.WRITE, CubeAccess.MANAGE] as const;

/** IdentityService: tenants, users, clients, grants and token authentication. */
export function identityHandlers(
  deps: CubeDeps,
  operatorToken: string | undefined,
): ServiceImpl<typeof IdentityService> {
  const clientPages = new OffsetPages(deps.internalKey, "ListClients");
  const grantPages = new OffsetPages(deps.internalKey, "ListCubeGrants");
  return {
    async createTenant(request, ctx) {
      const tenantName = name("name", request.name);
      const adminName = name("admin_display_name", request.adminDisplayName);
      const principal = await ctx.principal();
      if (principal.kind !== "operator") throw new PermissionDeniedError("only the operator creates tenants");
      const { tenant, user, token } = await runOp(deps, createTenant(deps, tenantName, adminName));
      return { tenant: tenantToWire(tenant), adminUser: userToWire(user), adminUserToken: token };
    },

    async issueUserToken(request, ctx) {
      const userId = optionalUuid("user_id", request.userId);
      if (userId && request.displayName !== "")
        throw new InvalidArgumentError("display_name", "must be empty when user_id is set");
      const displayName = userId ? undefined : name("display_name", request.displayName);
      const tenantId = userTenantOf(await ctx.principal());
      const { user, token } = await runOp(deps, issueUserToken(deps, tenantId, { userId, displayName }));
      return { user: userToWire(user), token };
    },

    async issueClient(request, ctx) {
      const clientName = name("name", request.name);
      const tenantId = userTenantOf(await ctx.principal());
      const { client, token } = await runOp(deps, issueClient(deps, tenantId, clientName));
      return { client: clientToWire(client), token };
    },

    async rotateClientCredential(request, ctx) {
      const clientId = requireUuid("client_id", request.clientId);
      const principal = await ctx.principal();
      const tenantId = tenantOf(principal);
      if (principal.kind !== "user" && !(principal.kind === "client" && principal.subjectId === clientId))
        throw new PermissionDeniedError("only users or the client itself rotate a credential");
      const { client, token, revoked } = await runOp(deps, rotateClient(deps, tenantId, clientId));
      return { client: clientToWire(client), token, revokedSessionCount: revoked };
    },

    async revokeClient(request, ctx) {
      const clientId = requireUuid("client_id", request.clientId);
      const tenantId = userTenantOf(await ctx.principal());
      return { client: clientToWire(await runOp(deps, revokeClient(deps, tenantId, clientId))) };
    },

    async listClients(request, ctx) {
      const size = pageSize("page_size", request.pageSize);
      const principal = await ctx.principal();
      const tenantId = tenantOf(principal);
      const binding = { caller: credentialKey(principal), filter: { includeRevoked: request.includeRevoked } };
      const offset = clientPages.offset(request.pageToken, binding);
      const own = clientOf(principal);
      if (principal.kind !== "user" && principal.kind !== "client")
        throw new PermissionDeniedError("only users and clients list clients");
      const rows = await listClients(deps, tenantId, { own, includeRevoked: request.includeRevoked }, offset, size);
      const page = clientPages.page(rows, offset, size, binding);
      return { clients: page.rows.map(clientToWire), nextPageToken: page.next };
    },

    async setCubeGrant(request, ctx) {
      const clientId = requireUuid("client_id", request.clientId);
      const cubeId = requireUuid("cube_id", request.cubeId);
      const access = enumValue("access", request.access, ACCESS_LEVELS);
      const grant = await runOp(
        deps,
        setCubeGrant(deps, await ctx.principal(), clientId, cubeId, access as AccessLevel),
      );
      return { grant: grantToWire(grant) };
    },

    async revokeCubeGrant(request, ctx) {
      const clientId = requireUuid("client_id", request.clientId);
      const cubeId = requireUuid("cube_id", request.cubeId);
      return { removed: await runOp(deps, revokeCubeGrant(deps, await ctx.principal(), clientId, cubeId)) };
    },

    async listCubeGrants(request, ctx) {
      const clientId = optionalUuid("client_id", request.clientId);
      const cubeId = optionalUuid("cube_id", request.cubeId);
      const size = pageSize("page_size", request.pageSize);
      const principal = await ctx.principal();
      const binding = { caller: credentialKey(principal), filter: { clientId: clientId ?? "", cubeId: cubeId ?? "" } };
      const offset = grantPages.offset(request.pageToken, binding);
      const rows = await listCubeGrants(deps, principal, { clientId, cubeId }, offset, size);
      const page = grantPages.page(rows, offset, size, binding);
      return { grants: page.rows.map(grantToWire), nextPageToken: page.next };
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
      const resolved = parsed
        ? await resolveTokenCached(deps, parsed, request.token)
        : deps.accessTokens && looksLikeJwt(request.token)
          ? await resolveAccessToken(deps, deps.accessTokens, request.token)
          : null;
      if (!resolved) throw new UnauthenticatedError("invalid credential");
      return authenticatedToWire(resolved, checkedAt);
    },

    async linkIdentity(request, ctx) {
      const linked = name("subject", request.subject);
      const target =
        request.target.case === "clientId"
          ? { clientId: requireUuid("client_id", request.target.value) }
          : request.target.case === "userId"
            ? { userId: requireUuid("user_id", request.target.value) }
            : undefined;
      if (!target) throw new InvalidArgumentError("target", "one of client_id and user_id is required");
      const tenantId = userTenantOf(await ctx.principal());
      const issuer = deps.accessTokens?.issuer;
      if (!issuer) throw new FailedPreconditionError("no identity provider is configured (OIDC_ISSUER)");
      const row = await runOp(deps, linkIdentity(deps, tenantId, issuer, linked, target));
      return { identity: externalIdentityToWire(row) };
    },

    async provisionIdentity(request) {
      if (request.accessToken === "") throw new InvalidArgumentError("access_token", "must not be empty");
      const verifier = deps.accessTokens;
      if (!verifier) throw new FailedPreconditionError("no identity provider is configured (OIDC_ISSUER)");
      const token = await verifier.verify(request.accessToken);
      const linked = await linkedPrincipal(deps, token, request.accessToken);
      if (linked) return { principal: authenticatedToWire(linked, deps.clock.now()).principal, provisioned: false };
      const { provisionTenant, roleClaim, userGroups } = deps.config;
      if (!provisionTenant || !token.subject) throw new PermissionDeniedError("your account is not linked to a user");
      if (!roleGranted(token.claims[roleClaim], userGroups)) {
        throw new PermissionDeniedError(`your ${roleClaim} give no Unimatrix role`);
      }
      const displayName = request.displayName.trim() || token.subject;
      const { created } = await runOp(
        deps,
        provisionIdentity(deps, provisionTenant, token.issuer, token.subject, displayName.slice(0, 200)),
      );
      const resolved = await linkedPrincipal(deps, token, request.accessToken);
      if (!resolved) throw new UnauthenticatedError("invalid credential");
      return { principal: authenticatedToWire(resolved, deps.clock.now()).principal, provisioned: created };
    },

    async unlinkIdentity(request, ctx) {
      const linked = name("subject", request.subject);
      const tenantId = userTenantOf(await ctx.principal());
      const issuer = deps.accessTokens?.issuer;
      if (!issuer) return { removed: false };
      return { removed: await runOp(deps, unlinkIdentity(deps, tenantId, issuer, linked)) };
    },
  };
}

/** True when a role claim (a string or a list) holds one of `groups`; every value counts when `groups` is empty. */
function roleGranted(claim: unknown, groups: readonly string[]): boolean {
  if (groups.length === 0) return true;
  const values = Array.isArray(claim) ? claim : typeof claim === "string" ? claim.split(" ") : [];
  return values.some((value) => typeof value === "string" && groups.includes(value));
}
