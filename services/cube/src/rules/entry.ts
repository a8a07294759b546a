import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { optionalUuid, requireUuid } from "@unimatrix/service-kit/rules";
import { charLength, name } from "./request";

/** The most recipients of one DIRECT entry. */
export const MAX_RECIPIENTS = 100;

/** What AppendEntry asks for, checked. */
export interface NewEntry {
  readonly message: string;
  readonly visibility: "broadcast" | "direct";
  readonly recipientDroneIds: string[];
  readonly kind?: string;
  /** The entry this one replies to (checked visible by the store). */
  readonly replyToEntryId?: string;
  /** False: no reply expected (no unread nudge; acks notify no one). */
  readonly expectsReply: boolean;
  /** A question to the cube's humans; DIRECT without recipients goes to the live human seats. */
  readonly askHuman: boolean;
}

/** The entry fields of an AppendEntry request. */
export interface EntryRequest {
  readonly message: string;
  readonly visibility: Visibility;
  readonly recipientDroneIds: readonly string[];
  readonly kind?: string;
  readonly replyToEntryId?: string;
  readonly expectsReply?: boolean;
  readonly askHuman?: boolean;
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
  const askHuman = request.askHuman ?? false;
  // A question to the humans may leave the recipients to the store (the cube's live human seats).
  const minimum = askHuman ? 0 : 1;
  if (visibility === "direct" && (recipients.length < minimum || recipients.length > MAX_RECIPIENTS))
    throw new InvalidArgumentError("recipient_drone_ids", `DIRECT needs 1-${MAX_RECIPIENTS} recipients`);
  if (new Set(recipients).size !== recipients.length)
    throw new InvalidArgumentError("recipient_drone_ids", "must be distinct");
  if (request.kind !== undefined && (request.kind.trim() === "" || charLength(request.kind) > 64))
    throw new InvalidArgumentError("kind", "must be 1-64 characters");
  const replyToEntryId = optionalUuid("reply_to_entry_id", request.replyToEntryId);
  return {
    message,
    visibility,
    recipientDroneIds: recipients,
    kind: request.kind,
    replyToEntryId,
    expectsReply: request.expectsReply ?? true,
    askHuman,
  };
}
