import type { IncomingMessage, ServerResponse } from "node:http";
import { status } from "@grpc/grpc-js";
import { principalFromMessage } from "@unimatrix/service-kit/auth";
import type { Clock } from "@unimatrix/service-kit/clock";
import { isServiceError } from "@unimatrix/service-kit/grpc";
import type { Logger } from "@unimatrix/service-kit/logger";
import type { Configuration } from "openid-client";
import {
  addCookies,
  clearedSessionCookies,
  cookieLine,
  cookiesOf,
  csrfMatches,
  seal,
  sessionCookies,
  sessionOf,
  unseal,
} from "./console-session";
import type { ProtectedResource } from "./protected-resource";
import { errorJson, statusRow } from "./status-table";
import type { Upstreams } from "./upstreams";

/** How people sign in to the console through the identity provider (authorization code + PKCE). */
export interface ConsoleSignInOptions {
  readonly resource: ProtectedResource;
  readonly clientId: string;
  readonly clientSecret: string;
  /** What the button says: "Sign in with <name>". */
  readonly providerName: string;
  readonly internalKey: string;
  readonly upstreams: Upstreams;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** The cookie that carries one sign-in attempt (state, nonce, PKCE verifier) to the callback. */
const ATTEMPT_COOKIE = "umx_oidc";
const ATTEMPT_PATH = "/auth/oidc";
/** How long a person has to finish signing in at the provider. */
const ATTEMPT_TTL_MS = 10 * 60_000;

interface Attempt {
  readonly state: string;
  readonly nonce: string;
  readonly verifier: string;
  readonly expiresAt: number;
}

/** openid-client is ESM-only: loaded by dynamic import (from CommonJS, and in jest). */
const openid = () => import("openid-client");

/**
 * The console's sign-in routes: `GET /auth/session` (what the console shows: the button, whether
 * a session is open), `GET /auth/oidc/login` (to the provider), `GET /auth/oidc/callback` (code →
 * tokens; the person must act as a Unimatrix user; the session cookie is set), `POST
 * /auth/logout` (CSRF header required; the cookies are cleared). Answers false for other paths.
 */
export function consoleSignIn(options: ConsoleSignInOptions | undefined) {
  let discovered: Promise<Configuration> | undefined;
  const configuration = (): Promise<Configuration> => {
    if (!options) throw new Error("no identity provider");
    discovered ??= openid().then(async (client) => {
      const issuer = new URL(options.resource.issuer);
      // A provider on plain http is only ever a local one (tests, a laptop); production issuers are https.
      const insecure = issuer.protocol === "http:" ? { execute: [client.allowInsecureRequests] } : undefined;
      return client.discovery(issuer, options.clientId, options.clientSecret, undefined, insecure);
    });
    discovered.catch(() => {
      discovered = undefined;
    });
    return discovered;
  };
  const redirectUri = () => `${options!.resource.base}/auth/oidc/callback`;

  const login = async (response: ServerResponse) => {
    const client = await openid();
    const config = await configuration();
    const attempt: Attempt = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      verifier: client.randomPKCECodeVerifier(),
      expiresAt: options!.clock.now().getTime() + ATTEMPT_TTL_MS,
    };
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri(),
      scope: `openid profile ${options!.resource.scope}`,
      resource: options!.resource.base,
      state: attempt.state,
      nonce: attempt.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(attempt.verifier),
      code_challenge_method: "S256",
    });
    addCookies(response, [
      attemptCookie(seal(attempt, options!.internalKey, "console-sign-in"), ATTEMPT_TTL_MS / 1000),
    ]);
    response.writeHead(302, { location: url.href, "cache-control": "no-store" }).end();
  };

  const callback = async (request: IncomingMessage, response: ServerResponse) => {
    const now = options!.clock.now().getTime();
    const attempt = unseal<Attempt>(cookiesOf(request)[ATTEMPT_COOKIE], options!.internalKey, "console-sign-in");
    addCookies(response, [attemptCookie("", 0)]);
    if (!attempt || attempt.expiresAt <= now) return page(response, 400, "This sign-in attempt expired. Start again.");
    const client = await openid();
    let accessToken: string;
    let name: unknown;
    try {
      const tokens = await client.authorizationCodeGrant(
        await configuration(),
        new URL(request.url ?? "/", options!.resource.base),
        { pkceCodeVerifier: attempt.verifier, expectedState: attempt.state, expectedNonce: attempt.nonce },
        { resource: options!.resource.base },
      );
      accessToken = tokens.access_token;
      name = tokens.claims()?.name;
    } catch (error) {
      options!.logger.warn({ err: error }, "console sign-in: the provider's answer was refused");
      return page(response, 400, "The identity provider's answer could not be accepted. Start again.");
    }
    // The session is the access token: it must act as a person of a tenant (linked, or provisioned now).
    let expiresAt: number | undefined;
    try {
      const answer = await options!.upstreams.identity.provisionIdentity(
        { accessToken, displayName: typeof name === "string" ? name.slice(0, 200) : "" },
        { deadline: 10_000 },
      );
      const principal = principalFromMessage(answer.principal);
      if (principal?.kind !== "user") {
        return page(response, 403, "Your account is linked to an agent client, not to a person: ask an admin.");
      }
      expiresAt = principal.expiresAt;
    } catch (error) {
      if (isServiceError(error) && (error.code === status.PERMISSION_DENIED || error.code === status.UNAUTHENTICATED)) {
        return page(
          response,
          403,
          "Your account is not linked to a Unimatrix user, and cannot be added: ask an admin.",
        );
      }
      throw error;
    }
    addCookies(response, sessionCookies(accessToken, expiresAt ?? now + 3_600_000, options!.internalKey, now));
    response.writeHead(302, { location: "/#/cubes", "cache-control": "no-store" }).end();
  };

  const state = (request: IncomingMessage, response: ServerResponse) => {
    const session = options ? sessionOf(request, options.internalKey, options.clock.now().getTime()) : undefined;
    json(response, 200, { provider: options ? { name: options.providerName } : null, signedIn: session !== undefined });
  };

  const logout = (request: IncomingMessage, response: ServerResponse) => {
    const session = options ? sessionOf(request, options.internalKey, options.clock.now().getTime()) : undefined;
    if (session && !csrfMatches(request, session)) {
      const code = status.PERMISSION_DENIED;
      return json(response, statusRow(code).http, errorJson(code, "sign-out needs its x-umx-csrf header"));
    }
    addCookies(response, clearedSessionCookies());
    json(response, 200, { signedOut: true });
  };

  /** Serves a sign-in route; false when `path` is not one. */
  return async (request: IncomingMessage, response: ServerResponse, path: string): Promise<boolean> => {
    if (path === "/auth/session" && request.method === "GET") state(request, response);
    else if (path === "/auth/logout" && request.method === "POST") logout(request, response);
    else if (!options) return false;
    else if (path === "/auth/oidc/login" && request.method === "GET") await login(response);
    else if (path === "/auth/oidc/callback" && request.method === "GET") await callback(request, response);
    else return false;
    return true;
  };
}

function attemptCookie(value: string, maxAgeSeconds: number): string {
  return cookieLine(ATTEMPT_COOKIE, value, ATTEMPT_PATH, maxAgeSeconds);
}

function json(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" }).end(text);
}

/** A one-line page for a person whose sign-in stopped (text only: nothing of the request is echoed). */
function page(response: ServerResponse, status: number, message: string): void {
  const text = `<!doctype html><meta charset="utf-8"><title>Sign-in</title><p>${message}</p><p><a href="/">Back to the console</a></p>`;
  response.writeHead(status, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" }).end(text);
}
