import { RecordDecisionRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { z } from "zod";
import { contractString } from "../contract-schema";
import { resolveEntry } from "./refs";
import { defineTool, entryRef, ok, WRITE } from "./spec";

/** `decision_record`: record a decision, optionally on an entry. */
export const decisionRecord = defineTool({
  name: "decision_record",
  title: "Record a decision",
  description: "Record a decision, optionally on an entry.",
  annotations: WRITE,
  input: {
    title: contractString(RecordDecisionRequestSchema, "title"),
    rationale: contractString(RecordDecisionRequestSchema, "rationale").optional(),
    entry_id: entryRef.optional(),
  },
  output: { id: z.string() },
  async run(session, input, signal) {
    const entryId =
      input.entry_id !== undefined ? await resolveEntry(session, input.entry_id, "entry_id", signal) : undefined;
    const reply = await session.upstreams.activity.recordDecision(
      {
        cubeId: session.cubeId(),
        title: input.title,
        rationale: input.rationale ?? "",
        ...(entryId !== undefined ? { entryId } : {}),
      },
      await session.asActor(signal),
    );
    return ok("recorded", { id: reply.decision?.id ?? "" });
  },
});
