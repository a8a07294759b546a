import { RecordDecisionRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { z } from "zod";
import { contractString } from "../contract-schema";
import { entryFields } from "./refs";
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
    const reply = await session.upstreams.activity.recordDecision(
      {
        cubeId: session.cubeId(),
        title: input.title,
        rationale: input.rationale ?? "",
        ...(input.entry_id !== undefined ? entryFields(input.entry_id) : {}),
      },
      await session.asActor(signal),
    );
    return ok("recorded", { id: reply.decision?.id ?? "" });
  },
});
