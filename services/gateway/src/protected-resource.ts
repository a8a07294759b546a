import type { IncomingMessage, ServerResponse } from "node:http";
import onHeaders from "on-headers";

/**
 * The gateway as an OAuth 2.1 protected resource (RFC 9728): the company's identity provider
 * that issues its access tokens, the scope they need, and the gateway's public URL (the resource
 * tokens name in `aud`; `/mcp` under it is the MCP server's own resource).
 */
export interface ProtectedResource {
  readonly issuer: string;
  /** The gateway's public URL, no trailing slash (`OIDC_AUDIENCE`). */
  readonly base: string;
  readonly scope: string;
}

/** The protected resource a configuration describes; undefined without an identity provider. */
export function protectedResourceOf(config: {
  readonly oidcIssuer: string;
  readonly oidcAudience: string;
  readonly oidcScope: string;
}): ProtectedResource | undefined {
  if (!config.oidcIssuer || !config.oidcAudience) return undefined;
  return { issuer: config.oidcIssuer, base: config.oidcAudience.replace(/\/+$/, ""), scope: config.oidcScope };
}

/** The two faces a challenge names: `/mcp` (its own resource) or every other API (the gateway's). */
type Surface = "mcp" | "api";

const WELL_KNOWN = "/.well-known/oauth-protected-resource";

/** The resource identifier of a surface: the gateway's public URL, or its `/mcp`. */
function resourceOf(resource: ProtectedResource, surface: Surface): string {
  return surface === "mcp" ? `${resource.base}/mcp` : resource.base;
}

/** Where a surface's metadata is published (RFC 9728 §3.1: the well-known path before the resource's path). */
function metadataUrlOf(resource: ProtectedResource, surface: Surface): string {
  const origin = new URL(resource.base);
  const path = new URL(resourceOf(resource, surface)).pathname.replace(/\/$/, "");
  return `${origin.origin}${WELL_KNOWN}${path}`;
}

/**
 * The `WWW-Authenticate` value of a 401 (RFC 6750 §3, RFC 9728 §5.1): `Bearer` with the metadata
 * URL and the scope needed when an identity provider is configured, and `error` when given.
 */
export function wwwAuthenticate(
  resource: ProtectedResource | undefined,
  surface: Surface,
  error?: "invalid_token",
): string {
  const params = ['realm="unimatrix"'];
  if (error) params.push(`error="${error}"`);
  if (resource) {
    params.push(`resource_metadata="${metadataUrlOf(resource, surface)}"`, `scope="${resource.scope}"`);
  }
  return `Bearer ${params.join(", ")}`;
}

/** The surface a request path belongs to. */
function surfaceOf(path: string): Surface {
  return path === "/mcp" ? "mcp" : "api";
}

/**
 * Makes every 401 of a response carry the challenge of its surface, whoever writes it (Connect's
 * adapter, the SSE endpoints, the gateway's own refusals); a challenge already set is kept.
 */
export function challengeUnauthorized(response: ServerResponse, resource: ProtectedResource | undefined, path: string) {
  onHeaders(response, function (this: ServerResponse) {
    if (this.statusCode === 401 && !this.hasHeader("www-authenticate")) {
      this.setHeader("www-authenticate", wwwAuthenticate(resource, surfaceOf(path)));
    }
  });
}

/** True for a path of the resource metadata (the gateway's, or `/mcp`'s path-suffixed form). */
export function isResourceMetadataPath(path: string): boolean {
  return path === WELL_KNOWN || path === `${WELL_KNOWN}/mcp`;
}

/**
 * Serves the Protected Resource Metadata of the gateway (`/.well-known/oauth-protected-resource`)
 * or of `/mcp` (`…/mcp`): the resource, its authorization server, the scope, bearer in the header
 * only. 404 without an identity provider.
 */
export function serveResourceMetadata(
  request: IncomingMessage,
  response: ServerResponse,
  resource: ProtectedResource | undefined,
  path: string,
): boolean {
  if (!resource || (request.method !== "GET" && request.method !== "HEAD")) return false;
  const surface: Surface = path.endsWith("/mcp") ? "mcp" : "api";
  const body = JSON.stringify({
    resource: resourceOf(resource, surface),
    authorization_servers: [resource.issuer],
    scopes_supported: [resource.scope],
    bearer_methods_supported: ["header"],
    resource_name: "Unimatrix",
  });
  response.writeHead(200, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "cache-control": "max-age=300",
    // Browser-based MCP clients read it cross-origin (RFC 9728 metadata is public).
    "access-control-allow-origin": "*",
  });
  response.end(request.method === "HEAD" ? undefined : body);
  return true;
}
