import type { createRemoteJWKSet, JWTPayload } from "jose";
import { z } from "zod";
import type { Clock } from "../clock";
import { envVar, registerEnv } from "../config";
import { UnauthenticatedError, UnavailableError } from "../errors";

const optionalUrl = z.union([z.literal(""), z.string().url("must be an https:// (or http:// for a local test) URL")]);

/**
 * Variables of the company's identity provider, read by every service that accepts its access
 * tokens (the gateway and cube, which owns the identities they map to). Empty issuer: only
 * Unimatrix's own tokens are accepted.
 */
export const accessTokenEnv = registerEnv({
  oidcIssuer: envVar(
    "OIDC_ISSUER",
    "Issuer URL of the company's identity provider whose JWT access tokens are accepted (and whose people sign in to the console). Empty: only Unimatrix tokens.",
    optionalUrl,
    "",
  ),
  oidcAudience: envVar(
    "OIDC_AUDIENCE",
    "The gateway's public URL (https://umx.example.com): the resource (RFC 8707) an access token must name in `aud` (it, or its /mcp), and the base of the published resource metadata. Required with OIDC_ISSUER.",
    optionalUrl,
    "",
  ),
  oidcScope: envVar(
    "OIDC_SCOPE",
    "The scope an access token must carry (in `scope` or `scp`) to call Unimatrix.",
    z.string().regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, "must be one scope token"),
    "unimatrix",
  ),
  oidcJwksUrl: envVar(
    "OIDC_JWKS_URL",
    "The issuer's JWKS URL. Empty: the `jwks_uri` of the issuer's discovery document.",
    optionalUrl,
    "",
  ),
});

/** What a verified access token says about its bearer. */
export interface AccessToken {
  readonly issuer: string;
  /** `sub`, when the token has one (a person, or a service account's own subject). */
  readonly subject: string | undefined;
  /** The OAuth client it was issued to (`client_id`, else `azp`), when named. */
  readonly clientId: string | undefined;
  readonly scopes: readonly string[];
  /** `exp`, milliseconds since the epoch. */
  readonly expiresAt: number;
  /** Every claim of the verified token (a role claim, say). */
  readonly claims: Readonly<Record<string, unknown>>;
}

/** How to verify the provider's access tokens. */
export interface AccessTokenOptions {
  readonly issuer: string;
  /** The gateway's public URL: a token must name it or its `/mcp` in `aud`. */
  readonly audience: string;
  readonly scope: string;
  /** Empty or undefined: discovered from the issuer. */
  readonly jwksUrl?: string | undefined;
  readonly clock: Clock;
  /** Least time between two JWKS fetches for an unknown key id (jose's cooldown; default 30 s). */
  readonly jwksCooldownMs?: number;
}

/** True for a bearer token shaped like a JWS compact serialisation (three base64url parts). */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token) && token.length <= 8192;
}

/** jose, loaded on first use: it is ESM-only, and a dynamic import loads it from CommonJS everywhere (jest too). */
type Jose = typeof import("jose");
let jose: Promise<Jose> | undefined;
function loadJose(): Promise<Jose> {
  jose ??= import("jose");
  return jose;
}

/**
 * Verifies JWT access tokens of one issuer: signature by the issuer's JWKS (fetched once, cached,
 * fetched again for a key id it does not know: key rotation needs no restart), `iss`, `aud` (the
 * resource), `exp`/`nbf` at the clock's time, and the required scope. Every refusal is
 * UNAUTHENTICATED; a JWKS that cannot be fetched is UNAVAILABLE.
 */
export class AccessTokenVerifier {
  readonly #options: AccessTokenOptions;
  #keys: Promise<ReturnType<typeof createRemoteJWKSet>> | undefined;

  constructor(options: AccessTokenOptions) {
    this.#options = options;
  }

  /** The configured issuer. */
  get issuer(): string {
    return this.#options.issuer;
  }

  /** The scope every token must carry. */
  get scope(): string {
    return this.#options.scope;
  }

  async verify(token: string): Promise<AccessToken> {
    if (!looksLikeJwt(token)) throw new UnauthenticatedError("malformed bearer token");
    const { jwtVerify, errors } = await loadJose();
    const keys = await this.#jwks();
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: this.#options.issuer,
        audience: audiencesOf(this.#options.audience),
        currentDate: this.#options.clock.now(),
        requiredClaims: ["exp"],
        clockTolerance: 0,
      }));
    } catch (error) {
      throw refusal(errors, error);
    }
    const scopes = scopesOf(payload);
    if (!scopes.includes(this.#options.scope)) {
      throw new UnauthenticatedError(`access token lacks the scope "${this.#options.scope}"`);
    }
    const clientId = stringClaim(payload.client_id) ?? stringClaim(payload.azp);
    return {
      issuer: this.#options.issuer,
      subject: stringClaim(payload.sub),
      clientId,
      scopes,
      expiresAt: (payload.exp as number) * 1000,
      claims: payload,
    };
  }

  /** The remote key set, its URL discovered once (a failed discovery is tried again on the next call). */
  #jwks(): Promise<ReturnType<typeof createRemoteJWKSet>> {
    this.#keys ??= Promise.all([this.#jwksUrl(), loadJose()]).then(([url, { createRemoteJWKSet }]) =>
      createRemoteJWKSet(new URL(url), { cooldownDuration: this.#options.jwksCooldownMs ?? 30_000 }),
    );
    const keys = this.#keys;
    keys.catch(() => {
      if (this.#keys === keys) this.#keys = undefined;
    });
    return keys;
  }

  async #jwksUrl(): Promise<string> {
    if (this.#options.jwksUrl) return this.#options.jwksUrl;
    const base = this.#options.issuer.replace(/\/$/, "");
    for (const path of ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"]) {
      try {
        const response = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(5_000) });
        if (!response.ok) continue;
        const document = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
        if (document.issuer === this.#options.issuer && typeof document.jwks_uri === "string") return document.jwks_uri;
      } catch {
        // the next well-known path, then UNAVAILABLE
      }
    }
    throw new UnavailableError("the identity provider's metadata cannot be read");
  }
}

/** The resources a token may name: the gateway, or its MCP endpoint (what MCP clients ask for, RFC 8707). */
function audiencesOf(base: string): string[] {
  const trimmed = base.replace(/\/+$/, "");
  return [trimmed, `${trimmed}/`, `${trimmed}/mcp`];
}

/** The token's scopes: `scope` (space-separated, RFC 9068) or `scp` (an array, as Entra ID and Okta send). */
function scopesOf(payload: JWTPayload): string[] {
  if (typeof payload.scope === "string") return payload.scope.split(" ").filter(Boolean);
  if (Array.isArray(payload.scp)) return payload.scp.filter((s): s is string => typeof s === "string");
  if (typeof payload.scp === "string") return payload.scp.split(" ").filter(Boolean);
  return [];
}

function stringClaim(value: unknown): string | undefined {
  return typeof value === "string" && value.length > 0 ? value : undefined;
}

/** A jose failure as UNAUTHENTICATED naming what was wrong (a JWKS fetch failure: UNAVAILABLE). */
function refusal(errors: Jose["errors"], error: unknown): Error {
  if (error instanceof errors.JWKSTimeout) return new UnavailableError("the identity provider's keys cannot be read");
  if (error instanceof errors.JWTExpired) return new UnauthenticatedError("access token expired");
  if (error instanceof errors.JWTClaimValidationFailed) {
    return new UnauthenticatedError(`access token refused: ${error.claim} ${error.reason}`);
  }
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWSSignatureVerificationFailed) {
    return new UnauthenticatedError("access token signature does not verify");
  }
  if (error instanceof errors.JOSEError) return new UnauthenticatedError("invalid access token");
  // A JWKS endpoint that cannot be reached (fetch failure) is the provider's outage, not the caller's fault.
  return new UnavailableError("the identity provider's keys cannot be read");
}
