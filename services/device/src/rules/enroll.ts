/** Enroll token rules: lifetime, when a token may be used, and what a second use with a key means. */
import { FailedPreconditionError, InvalidArgumentError, UnauthenticatedError } from "@unimatrix/service-kit/errors";
import type { EnrollTokenRow } from "../store/rows";

/** The longest enroll token lifetime: seven days. */
export const MAX_TTL_SECONDS = 604_800;

/** Enroll token lifetime: whole seconds (the wire type is uint32), 1 to 604800. */
export function ttlSeconds(value: number): number {
  if (!Number.isInteger(value) || value < 1 || value > MAX_TTL_SECONDS) {
    throw new InvalidArgumentError("ttl_seconds", "must be a whole number of seconds from 1 to 604800");
  }
  return value;
}

/** When a token issued at `now` with a valid `ttlSeconds` expires. */
export function expiresAt(now: Date, ttl: number): Date {
  return new Date(now.getTime() + ttl * 1000);
}

/** True while a token may be presented: not revoked and `now < expires_at` (consumed or not). */
export function tokenLive(token: Pick<EnrollTokenRow, "revoked_at" | "expires_at">, now: Date): boolean {
  return token.revoked_at === null && now.getTime() < token.expires_at.getTime();
}

/** True when a token is listed as unused: live and never consumed. */
export function tokenUnused(token: Pick<EnrollTokenRow, "revoked_at" | "expires_at" | "consumed_at">, now: Date) {
  return token.consumed_at === null && tokenLive(token, now);
}

/** The one answer for an unknown, wrong, expired or revoked enroll token (no oracle). */
export const BAD_ENROLL_TOKEN = "enroll_token is unknown, expired or revoked";

/**
 * What presenting a verified token with `publicKey` does: "first" (consume it, make the device),
 * "replay" (the same key again: the same device, a fresh credential); UNAUTHENTICATED when the token
 * is expired or revoked, FAILED_PRECONDITION when another key already consumed it.
 */
export function enrollStep(
  token: Pick<EnrollTokenRow, "revoked_at" | "expires_at" | "consumed_at" | "consumed_by_public_key">,
  publicKey: string,
  now: Date,
): "first" | "replay" {
  if (!tokenLive(token, now)) throw new UnauthenticatedError(BAD_ENROLL_TOKEN);
  if (token.consumed_at === null) return "first";
  if (token.consumed_by_public_key !== publicKey) {
    throw new FailedPreconditionError("enroll_token was already consumed by another public key");
  }
  return "replay";
}
