import { credentialKey, type ParsedToken, type Principal, parseToken } from "@unimatrix/service-kit/auth";
import { InvalidArgumentError, UnauthenticatedError } from "@unimatrix/service-kit/errors";
import { isUuid, type PageBinding, type PageSizeRule } from "@unimatrix/service-kit/rules";
import type { ListPosition } from "../store/rows";

/** ListMachines' page sizes: 0 → 50, at most 500. */
export const LIST_PAGE: PageSizeRule = { default: 50, max: 500 };

/**
 * A machine name that is not only whitespace: the one rule the contract cannot state (its rules,
 * checked in the kit before any handler, hold 1-200 characters, one line, no control characters).
 */
export function validateName(name: string): string {
  if (name.trim() === "") throw new InvalidArgumentError("name", "is required");
  return name;
}

/** What a ListMachines page token is bound to: the caller's credential and the include_revoked filter. */
export function listBinding(principal: Principal, includeRevoked: boolean): PageBinding {
  return { caller: credentialKey(principal), filter: { includeRevoked } };
}

/** The sealed form of a listing position (what PageTokens seals). */
export function positionValue(position: ListPosition): { n: string; i: string } {
  return { n: position.name, i: position.id };
}

/** The listing position an opened page token holds; INVALID_ARGUMENT naming `page_token` if it is not one. */
export function positionOf(value: unknown): ListPosition | null {
  if (value === null) return null;
  const v = value as { n?: unknown; i?: unknown };
  if (typeof v === "object" && typeof v.n === "string" && typeof v.i === "string" && isUuid(v.i)) {
    return { name: v.n, id: v.i };
  }
  throw new InvalidArgumentError("page_token", "is not a token from a previous ListMachines response");
}

/** The machine token of an Authenticate request: empty → INVALID_ARGUMENT `token`; not a machine token → UNAUTHENTICATED. */
export function requireMachineToken(token: string): ParsedToken {
  if (token === "") throw new InvalidArgumentError("token", "is required");
  const parsed = parseToken(token);
  if (parsed?.kind !== "machine") throw new UnauthenticatedError("not a machine credential");
  return parsed;
}
