/**
 * SetSeatState: a drone says what it is doing; a change is also a BROADCAST entry.
 *
 * Lock order: the drone row (`FOR UPDATE`) → then as the append: the drone's HELD claims → the
 * cube row (the position). One transaction.
 */

import { randomUUID } from "node:crypto";
import type { Principal } from "@unimatrix/service-kit/auth";
import { FailedPreconditionError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../deps";
import type { OpResult } from "../effects";
import { authorPrincipalId, READ } from "../rules/access";
import { staleAtFor } from "../rules/lease";
import { isSeatChange, type SeatStateName, seatStateMessage } from "../rules/seat";
import { requireAccess } from "../store/access";
import { inTransaction } from "../store/prisma";
import { type ActivityRow, type DroneRow, type ItemRow, NO_REACTIONS } from "../store/rows";
import { droneView } from "../tables/drones";
import { blankEntry, insertEntry } from "../tables/entries";
import { lockDroneRow, setState } from "../tables/seats";

/** What SetSeatState did: the drone after it, and the appended entry when it changed. */
export interface SeatStateResult {
  readonly drone: DroneRow;
  readonly entry: ItemRow | null;
}

/**
 * Sets the calling drone's seat state and note. Only drone sessions (FAILED_PRECONDITION
 * otherwise), in their own cube, at any posture (it is the drone's own seat, so observers and
 * roles that cannot broadcast may too). Under the drone's row lock: the same state and note again
 * changes nothing; a change updates the drone and appends one BROADCAST entry carrying it (no reply
 * expected), in one transaction. Effects: the cube's doorbell when it changed.
 */
export async function setSeatState(
  deps: CubeDeps,
  principal: Principal,
  cubeId: string,
  state: SeatStateName,
  note: string,
): Promise<OpResult<SeatStateResult>> {
  if (principal.kind !== "drone-session") throw new FailedPreconditionError("only drone sessions have a seat state");
  const s = await requireAccess(deps.prisma, principal, cubeId, READ, "setting the seat state");
  const droneId = principal.droneId;
  const now = deps.clock.now();
  const result = await inTransaction(deps.prisma, async (tx) => {
    const current = await lockDroneRow(tx, droneId);
    if (!isSeatChange({ state: current.state, note: current.stateNote }, { state, note }))
      return { drone: current, entry: null };
    await deps.guard.admit(Buffer.byteLength(note) + 300);
    const drone = await setState(tx, droneId, state, note, now);
    const row: ActivityRow = {
      ...blankEntry(),
      id: randomUUID(),
      cubeId,
      createdAt: now,
      authorDroneId: droneId,
      authorPrincipalId: authorPrincipalId(principal),
      authorPrincipalKind: principal.kind,
      authorLabel: s.drone?.label ?? current.label,
      message: seatStateMessage(state, note),
      visibility: "broadcast",
      expectsReply: false,
      seatState: state,
      seatStateNote: note,
    };
    row.position = (await insertEntry(tx, row, [], staleAtFor(now, deps.config.claimLeaseSeconds))).position;
    return { drone, entry: { row, state: NO_REACTIONS } as ItemRow };
  });
  const view = await droneView(deps.prisma, result.drone, now);
  return { result: { drone: view, entry: result.entry }, effects: result.entry ? { activity: [cubeId] } : {} };
}
