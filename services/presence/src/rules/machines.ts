import { InvalidArgumentError, type ParsedToken, parseToken, UnauthenticatedError } from "@unimatrix/service-kit";
import type { ListPosition } from "../store/rows";
import { requireUuid } from "./access";

const CONTROL = /\p{Cc}/u;

/** Largest ListMachines page; `page_size` 0 means the default. */
export const PAGE_SIZE = { default: 50, max: 500 } as const;

/** A machine name: 1-200 characters, no control characters, not blank. */
export function validateName(name: string): string {
  const length = [...name].length;
  if (length === 0 || name.trim() === "") throw new InvalidArgumentError("name", "is required");
  if (length > 200) throw new InvalidArgumentError("name", "must be at most 200 characters");
  if (CONTROL.test(name)) throw new InvalidArgumentError("name", "must not contain control characters");
  return name;
}

/** ListMachines' page size: 0 → 50, capped at 500, negative → INVALID_ARGUMENT naming `page_size`. */
export function pageSizeOf(value: number): number {
  if (value < 0) throw new InvalidArgumentError("page_size", "must not be negative");
  if (value === 0) return PAGE_SIZE.default;
  return Math.min(value, PAGE_SIZE.max);
}

/** The page token that continues a listing after `position`. */
export function encodePosition(position: ListPosition): string {
  return Buffer.from(JSON.stringify({ n: position.name, i: position.id })).toString("base64url");
}

/** The position a page token continues from; null for none; INVALID_ARGUMENT naming `page_token` when it is not ours. */
export function decodePosition(token: string): ListPosition | null {
  if (token === "") return null;
  try {
    const value = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as { n?: unknown; i?: unknown };
    if (typeof value.n === "string" && typeof value.i === "string") {
      requireUuid("page_token", value.i);
      return { name: value.n, id: value.i };
    }
  } catch {
    // fall through
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
