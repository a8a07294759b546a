import { z } from "zod";
import { preview, shortTime } from "../format";
import { defineTool, ok, pageSize, pageToken, READ } from "./spec";

/** `decision_list`: the cube's decisions, newest first. */
export const decisionList = defineTool({
  name: "decision_list",
  title: "List decisions",
  description: "The cube's decisions, newest first.",
  annotations: READ,
  input: { page_size: pageSize, page_token: pageToken },
  output: { decisions: z.array(z.object({ id: z.string() })), next: z.string().optional() },
  async run(session, input, signal) {
    const reply = await session.upstreams.activity.listDecisions(
      { cubeId: session.cubeId(), pageSize: input.page_size ?? 0, pageToken: input.page_token ?? "" },
      await session.asActor(signal),
    );
    const lines = reply.decisions.map(
      (d) =>
        `${shortTime(d.createdAt)} ${d.author?.label || "someone"}: ${d.title}${d.rationale ? ` — ${preview(d.rationale, 200)}` : ""}`,
    );
    if (reply.nextPageToken) lines.push(`more: page_token ${reply.nextPageToken}`);
    return ok(lines.join("\n") || "no decisions", {
      decisions: reply.decisions.map((d) => ({ id: d.id })),
      ...(reply.nextPageToken ? { next: reply.nextPageToken } : {}),
    });
  },
});
