import { z } from "zod";
import { shortTime } from "../format";
import { defineTool, ok, pageSize, pageToken, READ } from "./spec";

/** `machines_list`: the tenant's machines, linked or not. */
export const machinesList = defineTool({
  name: "machines_list",
  title: "List machines",
  description: "Your tenant's machines, linked or not.",
  annotations: READ,
  input: { page_size: pageSize, page_token: pageToken },
  output: { machines: z.array(z.object({ id: z.string() })), next: z.string().optional() },
  async run(session, input, signal) {
    const reply = await session.upstreams.machine.listMachines(
      { pageSize: input.page_size ?? 0, pageToken: input.page_token ?? "" },
      await session.asCaller(signal),
    );
    const lines = reply.machines.map(
      (m) => `${m.name} (${m.id}): ${m.linked ? "linked" : "unlinked"} since ${shortTime(m.presenceChangedAt)}`,
    );
    if (reply.nextPageToken) lines.push(`more: page_token ${reply.nextPageToken}`);
    return ok(lines.join("\n") || "no machines", {
      machines: reply.machines.map((m) => ({ id: m.id })),
      ...(reply.nextPageToken ? { next: reply.nextPageToken } : {}),
    });
  },
});
