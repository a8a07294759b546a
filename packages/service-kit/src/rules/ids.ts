import { InvalidArgumentError } from "../errors";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A canonical lowercase UUID from a request field; empty, malformed or upper case is INVALID_ARGUMENT naming it. */
export function requireUuid(field: string, value: string): string {
  if (value === "") throw new InvalidArgumentError(field, "is required");
  if (!UUID.test(value)) throw new InvalidArgumentError(field, "must be a canonical lowercase UUID");
  return value;
}

/** An optional UUID: empty or undefined → undefined, otherwise as `requireUuid`. */
export function optionalUuid(field: string, value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : requireUuid(field, value);
}

/** True for a canonical lowercase UUID. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}
