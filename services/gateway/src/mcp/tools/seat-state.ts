import { SetSeatStateRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { SeatState } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { z } from "zod";
import { contractString } from "../contract-schema";
import { defineTool, IDEMPOTENT, ok } from "./spec";

const STATES = {
  working: SeatState.WORKING,
  waiting: SeatState.WAITING,
  blocked: SeatState.BLOCKED,
  idle: SeatState.IDLE,
} as const;

/** `seat_state`: say what the seat is doing, with a note. */
export const seatState = defineTool({
  name: "seat_state",
  title: "Set your seat state",
  description: "Say what you are doing, with a note.",
  annotations: IDEMPOTENT,
  input: {
    state: z.enum(["working", "waiting", "blocked", "idle"]),
    note: contractString(SetSeatStateRequestSchema, "note").optional(),
  },
  output: { changed: z.boolean() },
  async run(session, input, signal) {
    const seat = session.requireSeat();
    const reply = await session.upstreams.cube.setSeatState(
      { cubeId: seat.cubeId, state: STATES[input.state], note: input.note ?? "" },
      await session.asActor(signal),
    );
    return ok(reply.changed ? `now ${input.state}` : "unchanged", { changed: reply.changed });
  },
});
