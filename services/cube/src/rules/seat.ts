/** A drone's seat state as stored. */
export type SeatStateName = "working" | "waiting" | "blocked" | "idle";

/** Whether setting `next` changes the drone's seat (same state and note again is no change). */
export function isSeatChange(
  current: { state: string | null; note: string },
  next: { state: SeatStateName; note: string },
): boolean {
  return current.state !== next.state || current.note !== next.note;
}

/** The message of the entry a seat state change appends: `[STATE] waiting: on CI`. */
export function seatStateMessage(state: SeatStateName, note: string): string {
  return note === "" ? `[STATE] ${state}` : `[STATE] ${state}: ${note}`;
}
