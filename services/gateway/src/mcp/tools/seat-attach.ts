import { AttachSeatOutcome, AttachSeatRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { z } from "zod";
import { contractString } from "../contract-schema";
import { SESSION_REJECTED_TEXT } from "../format";
import { defineTool, IDEMPOTENT, ok, uuid } from "./spec";

/** `seat_attach`: take (or resume) a seat in a cube; later calls act as that drone. */
export const seatAttach = defineTool({
  name: "seat_attach",
  title: "Take a seat",
  description: "Take a seat (a drone) in a cube; shows the directive. Later calls act as that drone.",
  annotations: IDEMPOTENT,
  input: {
    cube_id: uuid,
    role_id: uuid.optional(),
    session_token: contractString(AttachSeatRequestSchema, "session_token")
      .optional()
      .describe("From an earlier seat_attach: resumes it"),
    prior_drone_id: uuid.optional().describe("Reattach this drone of yours"),
  },
  output: {
    outcome: z.string(),
    drone_id: z.string(),
    label: z.string(),
    role: z.string(),
    session_token: z.string().optional(),
  },
  async run(session, input, signal) {
    const reply = await session.attach(input.cube_id, input.role_id, {
      priorDroneId: input.prior_drone_id,
      sessionToken: input.session_token,
      signal,
    });
    if (reply.outcome === AttachSeatOutcome.SESSION_REJECTED) {
      return {
        isError: true,
        content: [{ type: "text", text: SESSION_REJECTED_TEXT }],
      };
    }
    const outcome = reply.outcome === AttachSeatOutcome.REUSED ? "reused" : "created";
    const drone = reply.drone!;
    const { cube } = await session.upstreams.cube.getCube({ cubeId: input.cube_id }, await session.asActor(signal));
    const lines = [
      `Seat ${outcome}: you are ${drone.label} (role ${drone.roleName}) in ${cube?.name}.`,
      `Directive: ${cube?.directive || "(none)"}`,
      ...(reply.sessionToken ? [`session_token (keep it to resume this seat): ${reply.sessionToken}`] : []),
      "Next: log_read (what waits for you), log_wait (wait for more).",
    ];
    return ok(lines.join("\n"), {
      outcome,
      drone_id: drone.id,
      label: drone.label,
      role: drone.roleName,
      ...(reply.sessionToken ? { session_token: reply.sessionToken } : {}),
    });
  },
});
