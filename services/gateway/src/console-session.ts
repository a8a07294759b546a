import { randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { parse, serialize } from "cookie";
import { Sealer } from "./mcp/sealer";

/** The console's session cookie: the provider's access token and the session's CSRF token, sealed (encrypted). */
const SESSION_COOKIE = "umx_session";
/** The CSRF token the console script reads and sends back in `CSRF_HEADER` (double submit, sealed in the session). */
const CSRF_COOKIE = "umx_csrf";
/** The header a cookie-authenticated call must carry, equal to the session's CSRF token. */
const CSRF_HEADER = "x-umx-csrf";

/** What a console session holds. */
export interface ConsoleSession {
  /** The provider's access token the session calls with (its `exp` ends the session). */
  readonly accessToken: string;
  readonly csrf: string;
  /** Epoch ms: the access token's expiry. */
  readonly expiresAt: number;
}

/** What a sealed value is for: a session cannot be replayed as a sign-in attempt, nor the reverse. */
type Purpose = "console-session" | "console-sign-in";

/** A value sealed for the fleet (the gateway's `Sealer`: AES-256-GCM under a key derived from the internal key and `purpose`). */
export function seal(value: unknown, key: string, purpose: Purpose): string {
  return new Sealer(key, purpose).seal(JSON.stringify(value));
}

/** The value of a sealed string, or undefined when forged, altered, sealed for another purpose or malformed. */
export function unseal<T>(sealed: string | undefined, key: string, purpose: Purpose): T | undefined {
  if (!sealed) return undefined;
  try {
    return JSON.parse(new Sealer(key, purpose).unseal(sealed)) as T;
  } catch {
    return undefined;
  }
}

/** A request's cookies. */
export function cookiesOf(request: IncomingMessage): Record<string, string | undefined> {
  return parse(request.headers.cookie ?? "");
}

/** Cookie attributes every console cookie shares: HttpOnly unless said, Secure, SameSite=Lax. */
function attributes(path: string, maxAgeSeconds: number, httpOnly = true) {
  return { path, maxAge: Math.max(0, Math.floor(maxAgeSeconds)), httpOnly, secure: true, sameSite: "lax" as const };
}

/** A Set-Cookie line with the console's attributes (HttpOnly, Secure, SameSite=Lax), for `path`. */
export function cookieLine(name: string, value: string, path: string, maxAgeSeconds: number): string {
  return serialize(name, value, attributes(path, maxAgeSeconds));
}

/** Appends Set-Cookie lines to a response. */
export function addCookies(response: ServerResponse, lines: readonly string[]): void {
  const existing = response.getHeader("set-cookie");
  const before = existing === undefined ? [] : Array.isArray(existing) ? existing : [String(existing)];
  response.setHeader("set-cookie", [...before, ...lines]);
}

/** The Set-Cookie lines of a new session (and its readable CSRF cookie), living as long as its token. */
export function sessionCookies(accessToken: string, expiresAt: number, key: string, now: number): string[] {
  const csrf = randomBytes(24).toString("base64url");
  const ttl = (expiresAt - now) / 1000;
  return [
    serialize(
      SESSION_COOKIE,
      seal({ accessToken, csrf, expiresAt } satisfies ConsoleSession, key, "console-session"),
      attributes("/", ttl),
    ),
    serialize(CSRF_COOKIE, csrf, attributes("/", ttl, false)),
  ];
}

/** The Set-Cookie lines that end a session. */
export function clearedSessionCookies(): string[] {
  return [serialize(SESSION_COOKIE, "", attributes("/", 0)), serialize(CSRF_COOKIE, "", attributes("/", 0, false))];
}

/** The session a request carries, when sealed by this installation and unexpired. */
export function sessionOf(request: IncomingMessage, key: string, now: number): ConsoleSession | undefined {
  const session = unseal<ConsoleSession>(cookiesOf(request)[SESSION_COOKIE], key, "console-session");
  if (!session || typeof session.accessToken !== "string" || typeof session.csrf !== "string") return undefined;
  return session.expiresAt > now ? session : undefined;
}

/** True when the request's CSRF header equals the session's token (constant time). */
export function csrfMatches(request: IncomingMessage, session: ConsoleSession): boolean {
  const header = request.headers[CSRF_HEADER];
  if (typeof header !== "string") return false;
  const given = Buffer.from(header);
  const expected = Buffer.from(session.csrf);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * A console call authenticated by its session cookie: with no `Authorization` header, a valid
 * session and a matching CSRF header, the session's access token becomes the call's bearer
 * (everything after — cube's check, the doors, the expiry — is the token's). "csrf" when a
 * session is presented without the header that proves the call comes from the console's own
 * page; undefined when the request does not use a session. `/mcp` never does (agents send tokens).
 */
export function adoptSession(
  request: IncomingMessage,
  path: string,
  key: string,
  now: number,
): "adopted" | "csrf" | undefined {
  if (request.headers.authorization !== undefined || path === "/mcp" || path.startsWith("/auth/")) return undefined;
  const session = sessionOf(request, key, now);
  if (!session) return undefined;
  if (!csrfMatches(request, session)) return "csrf";
  request.headers.authorization = `Bearer ${session.accessToken}`;
  return "adopted";
}
