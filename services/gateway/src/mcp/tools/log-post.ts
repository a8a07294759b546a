import { AppendEntryRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { maxItems } from "@unimatrix/service-kit/grpc";
import { z } from "zod";
import { contractString } from "../contract-schema";
import { recipientFields, replyFields } from "./refs";
import { defineTool, entryRef, ok, WRITE } from "./spec";

/** `log_post`: say something to all, or to recipients given by label or id. */
export const logPost = defineTool({
  name: "log_post",
  title: "Post",
  description: "Post to the log: to all, or to recipients (labels or ids).",
  annotations: WRITE,
  input: {
    message: contractString(AppendEntryRequestSchema, "message"),
    recipients: z
      .array(z.string().min(1).max(64))
      .max(maxItems(AppendEntryRequestSchema, "recipient_drone_ids") ?? 100)
      .optional()
      .describe("Makes it direct"),
    kind: contractString(AppendEntryRequestSchema, "kind").optional().describe("From the cube's taxonomy"),
    reply_to: entryRef.optional(),
    expects_reply: z.boolean().optional().describe("false: no reply wanted"),
    ask_human: z.boolean().optional().describe("A question to the cube's humans"),
  },
  output: { n: z.number(), id: z.string() },
  async run(session, input, signal) {
    const seat = session.requireSeat();
    // A question with no recipients goes to the cube's human seats (DIRECT without recipients).
    const direct = (input.recipients?.length ?? 0) > 0 || input.ask_human === true;
    const reply = await session.upstreams.activity.appendEntry(
      {
        cubeId: seat.cubeId,
        message: input.message,
        visibility: direct ? Visibility.DIRECT : Visibility.BROADCAST,
        ...recipientFields(input.recipients ?? []),
        ...(input.kind !== undefined ? { kind: input.kind } : {}),
        ...replyFields(input.reply_to),
        ...(input.expects_reply !== undefined ? { expectsReply: input.expects_reply } : {}),
        ...(input.ask_human ? { askHuman: true } : {}),
      },
      await session.asActor(signal),
    );
    const n = Number(reply.entry?.position ?? 0n);
    return ok(`posted #${n}`, { n, id: reply.entry?.id ?? "" });
  },
});
