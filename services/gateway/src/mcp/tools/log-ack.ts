import { z } from "zod";
import { entryFields } from "./refs";
import { defineTool, entryRef, IDEMPOTENT, ok } from "./spec";

/** `log_ack`: acknowledge an entry (its author is told unless quiet). */
export const logAck = defineTool({
  name: "log_ack",
  title: "Acknowledge",
  description: "Acknowledge an entry; its author is told.",
  annotations: IDEMPOTENT,
  input: { entry_id: entryRef, quiet: z.boolean().optional().describe("Do not notify the author") },
  output: { acked: z.boolean() },
  async run(session, input, signal) {
    const reply = await session.upstreams.activity.ackEntry(
      { cubeId: session.cubeId(), ...entryFields(input.entry_id), quiet: input.quiet === true },
      await session.asActor(signal),
    );
    return ok(reply.newlyAcked ? "acked" : "already acked", { acked: reply.newlyAcked });
  },
});
