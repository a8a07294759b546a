import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { InvalidArgumentError, PermissionDeniedError } from "@unimatrix/service-kit/errors";
import { optionalUuid, requireUuid } from "@unimatrix/service-kit/rules";
import { charLength, name } from "./request";
import { taxonomyKinds } from "./taxonomy";

/** The most recipients of one DIRECT entry. */
export const MAX_RECIPIENTS = 100;

/** What AppendEntry asks for, checked. */
export interface NewEntry {
  readonly message: string;
  readonly visibility: "broadcast" | "direct";
  readonly recipientDroneIds: string[];
  readonly kind?: string;
  /** The entry this one replies to (checked visible by the store). */
  readonly replyTo?: EntryRef;
  /** DIRECT recipients named by label (resolved against the cube's live drones by the store). */
  readonly recipientLabels: string[];
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
  readonly replyToPosition?: bigint;
  readonly recipientLabels?: readonly string[];
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
  const labels = (request.recipientLabels ?? []).map((label) => name("recipient_labels", label));
  if (visibility === "broadcast" && recipients.length > 0)
    throw new InvalidArgumentError("recipient_drone_ids", "must be empty for BROADCAST");
  if (visibility === "broadcast" && labels.length > 0)
    throw new InvalidArgumentError("recipient_labels", "must be empty for BROADCAST");
  if (new Set(labels).size !== labels.length) throw new InvalidArgumentError("recipient_labels", "must be distinct");
  const askHuman = request.askHuman ?? false;
  // A question to the humans may leave the recipients to the store (the cube's live human seats).
  const minimum = askHuman ? 0 : 1;
  const named = recipients.length + labels.length;
  if (visibility === "direct" && (named < minimum || named > MAX_RECIPIENTS))
    throw new InvalidArgumentError("recipient_drone_ids", `DIRECT needs 1-${MAX_RECIPIENTS} recipients`);
  if (new Set(recipients).size !== recipients.length)
    throw new InvalidArgumentError("recipient_drone_ids", "must be distinct");
  if (request.kind !== undefined && (request.kind.trim() === "" || charLength(request.kind) > 64))
    throw new InvalidArgumentError("kind", "must be 1-64 characters");
  const replyTo = optionalEntryRef(
    { field: "reply_to_entry_id", id: request.replyToEntryId },
    { field: "reply_to_position", position: request.replyToPosition ?? 0n },
  );
  return {
    message,
    visibility,
    recipientDroneIds: recipients,
    recipientLabels: labels,
    kind: request.kind,
    ...(replyTo ? { replyTo } : {}),
    expectsReply: request.expectsReply ?? true,
    askHuman,
  };
}

/** An entry named by its UUID or by its position (`#n`) in the cube's order; `field` is the request field that named it. */
export type EntryRef = { readonly field: string } & ({ readonly id: string } | { readonly position: bigint });

/**
 * The entry a request names by `entry_id` or `entry_position`: exactly one of them
 * (INVALID_ARGUMENT naming `entry_id` otherwise).
 */
export function entryRef(request: { readonly entryId: string; readonly entryPosition: bigint }): EntryRef {
  const ref = optionalEntryRef(
    { field: "entry_id", id: request.entryId || undefined },
    { field: "entry_position", position: request.entryPosition },
  );
  if (!ref) throw new InvalidArgumentError("entry_id", "set entry_id or entry_position");
  return ref;
}

/** An entry named by an id field or a position field (0 = unset), or neither; both is INVALID_ARGUMENT naming the id field. */
export function optionalEntryRef(
  byId: { readonly field: string; readonly id: string | undefined },
  byPosition: { readonly field: string; readonly position: bigint },
): EntryRef | undefined {
  const id = optionalUuid(byId.field, byId.id);
  if (id !== undefined && byPosition.position > 0n)
    throw new InvalidArgumentError(byId.field, `set ${byId.field} or ${byPosition.field}, not both`);
  if (id !== undefined) return { field: byId.field, id };
  if (byPosition.position > 0n) return { field: byPosition.field, position: byPosition.position };
  return undefined;
}

/**
 * Whether the poster may post this entry: a drone whose role cannot broadcast may not broadcast
 * (PERMISSION_DENIED); a kind must be one of the cube's taxonomy kinds (INVALID_ARGUMENT naming `kind`).
 */
export function checkPoster(
  poster: { readonly drone?: { readonly canBroadcast: boolean }; readonly taxonomyJson: string | null },
  entry: NewEntry,
): void {
  if (entry.visibility === "broadcast" && poster.drone && !poster.drone.canBroadcast)
    throw new PermissionDeniedError("this drone's role cannot broadcast");
  if (entry.kind !== undefined && poster.taxonomyJson && !taxonomyKinds(poster.taxonomyJson).has(entry.kind))
    throw new InvalidArgumentError("kind", "is not one of the cube's taxonomy kinds");
}
