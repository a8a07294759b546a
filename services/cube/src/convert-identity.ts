import type { MessageInitShape } from "@bufbuild/protobuf";
import type { AuthenticateResponseSchema } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import type {
  ClientSchema,
  CubeGrantSchema,
  ExternalIdentitySchema,
  TenantSchema,
  UserSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { principalKindOf } from "@unimatrix/service-kit/auth";
import { optTs, ts } from "./convert";
import type { ApiClient, CubeGrant, ResolvedToken, Tenant, User } from "./store/rows";
import type { ExternalIdentityRow } from "./tables/external-identities";

// Identity rows to the wire (IdentityService): tenants, users, clients, grants, links, Authenticate.

/** An API client (never its credential digests). */
export function clientToWire(client: ApiClient): MessageInitShape<typeof ClientSchema> {
  return {
    id: client.id,
    tenantId: client.tenantId,
    name: client.name,
    createdAt: ts(client.createdAt),
    credentialIssuedAt: ts(client.credentialIssuedAt),
    revokedAt: optTs(client.revokedAt),
  };
}

/** A tenant. */
export function tenantToWire(tenant: Tenant): MessageInitShape<typeof TenantSchema> {
  return { id: tenant.id, name: tenant.name, createdAt: ts(tenant.createdAt) };
}

/** A user of a tenant. */
export function userToWire(user: User): MessageInitShape<typeof UserSchema> {
  return { id: user.id, tenantId: user.tenantId, displayName: user.displayName, createdAt: ts(user.createdAt) };
}

/** A client's grant on a cube. */
export function grantToWire(grant: CubeGrant): MessageInitShape<typeof CubeGrantSchema> {
  return { clientId: grant.clientId, cubeId: grant.cubeId, access: grant.access, updatedAt: ts(grant.updatedAt) };
}

/** The Authenticate answer for a resolved token (or the operator, when `resolved` is "operator"). */
export function authenticatedToWire(
  resolved: ResolvedToken | "operator",
  checkedAt: Date,
): MessageInitShape<typeof AuthenticateResponseSchema> {
  if (resolved === "operator")
    return {
      principal: { kind: principalKindOf("operator"), subjectId: "operator", displayName: "operator" },
      checkedAt: ts(checkedAt),
    };
  const p = resolved.principal;
  return {
    principal: {
      kind: principalKindOf(p.kind),
      tenantId: p.tenantId ?? "",
      subjectId: p.subjectId,
      clientId: p.kind === "drone-session" ? p.clientId : "",
      cubeId: p.kind === "drone-session" ? p.cubeId : "",
      droneId: p.kind === "drone-session" ? p.droneId : "",
      expiresAt: optTs(resolved.expiresAt),
      credentialId: resolved.credentialId,
      displayName: resolved.displayName,
    },
    checkedAt: ts(checkedAt),
  };
}

/** A stored link to the company's identity provider. */
export function externalIdentityToWire(row: ExternalIdentityRow): MessageInitShape<typeof ExternalIdentitySchema> {
  return {
    issuer: row.issuer,
    subject: row.subject,
    tenantId: row.tenantId,
    clientId: row.clientId ?? "",
    userId: row.userId ?? "",
    createdAt: ts(row.createdAt),
  };
}
