import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { InvalidArgumentError, requireUuid } from "@unimatrix/service-kit";
import { charLength, name } from "./request";

/** The most recipients of one DIRECT entry. */
export const MAX_RECIPIENTS = 100;

/** What AppendEntry asks for, checked. */
export interface NewEntry {
  readonly message: string;
  readonly visibility: "broadcast" | "direct";
  readonly recipientDroneIds: string[];
  readonly kind?: string;
}

/** The entry fields of an AppendEntry request. */
export interface EntryRequest {
  readonly message: string;
  readonly visibility: Visibility;
  readonly recipientDroneIds: readonly string[];
  readonly kind?: string;
}

/**
 * Checks an AppendEntry request's entry (message, visibility, recipients, kind, in that order);
 * INVALID_ARGUMENT naming the first bad field.
 */
export function checkEntry(request: EntryRequest): NewEntry {
  const message = name("message", request.message);
  let visibility: "broadcast" | "direct";
  if (request.visibility === Visibility.BROADCAST) visibility = "broadcast";
  else if (request.visibility === Visibility.DIRECT) visibility = "direct";
  else throw new InvalidArgumentError("visibility", "must be BROADCAST or DIRECT");
  const recipients = request.recipientDroneIds.map((id) => requireUuid("recipient_drone_ids", id));
  if (visibility === "broadcast" && recipients.length > 0)
    throw new InvalidArgumentError("recipient_drone_ids", "must be empty for BROADCAST");
  if (visibility === "direct" && (recipients.length === 0 || recipients.length > MAX_RECIPIENTS))
    throw new InvalidArgumentError("recipient_drone_ids", `DIRECT needs 1-${MAX_RECIPIENTS} recipients`);
  if (new Set(recipients).size !== recipients.length)
    throw new InvalidArgumentError("recipient_drone_ids", "must be distinct");
  if (request.kind !== undefined && (request.kind.trim() === "" || charLength(request.kind) > 64))
    throw new InvalidArgumentError("kind", "must be 1-64 characters");
  return { message, visibility, recipientDroneIds: recipients, kind: request.kind };
}
