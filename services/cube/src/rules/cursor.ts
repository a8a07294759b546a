import { FailedPreconditionError, InvalidArgumentError } from "@unimatrix/service-kit/errors";

/**
 * Opaque activity cursors: `a` + base64url(16 bytes cube id + 8 bytes position). The cube id makes
 * a cursor from another cube a clear error instead of a silent jump.
 */
export function encodeCursor(cubeId: string, position: bigint): string {
  const buf = Buffer.alloc(24);
  Buffer.from(cubeId.replaceAll("-", ""), "hex").copy(buf, 0);
  buf.writeBigUInt64BE(position, 16);
  return `a${buf.toString("base64url")}`;
}

/** The position in a cursor (empty = 0); INVALID_ARGUMENT naming `field` when malformed or from another cube. */
export function decodeCursor(field: string, cubeId: string, cursor: string): bigint {
  if (cursor === "") return 0n;
  const buf = cursor.startsWith("a") ? Buffer.from(cursor.slice(1), "base64url") : Buffer.alloc(0);
  if (buf.length !== 24 || encodeCursor(cubeIdOf(buf), buf.readBigUInt64BE(16)) !== cursor)
    throw new InvalidArgumentError(field, "is not a valid activity cursor");
  if (cubeIdOf(buf) !== cubeId) throw new InvalidArgumentError(field, "belongs to another cube");
  return buf.readBigUInt64BE(16);
}

/** The part of a cube's order a cursor may point into: [`floor`, `head`]; `floor` is 0 while nothing is pruned. */
export interface CursorWindow {
  /** The cube's last position. */
  readonly head: bigint;
  /** The newest position that was pruned away (0: nothing pruned, no cursor expires). */
  readonly floor: bigint;
}

/**
 * The position a cursor names in a cube: malformed, foreign or ahead of the head is
 * INVALID_ARGUMENT naming `field`; empty is the oldest kept position; behind the pruned floor (expired) is FAILED_PRECONDITION.
 */
export function cursorPosition(field: string, cubeId: string, window: CursorWindow, cursor: string): bigint {
  if (cursor === "") return window.floor;
  const position = decodeCursor(field, cubeId, cursor);
  if (position > window.head) throw new InvalidArgumentError(field, "is ahead of the cube's activity");
  if (position < window.floor) throw expired(field);
  return position;
}

/** A cursor behind the retained floor: FAILED_PRECONDITION, restart from an empty cursor (the floor). */
export function expired(field: string): FailedPreconditionError {
  return new FailedPreconditionError(
    `${field} has expired: the activity after it was pruned by retention; read again from an empty cursor`,
  );
}

function cubeIdOf(buf: Buffer): string {
  const hex = buf.subarray(0, 16).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
