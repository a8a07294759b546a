import { DeliveryChannel } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { z } from "zod";
import { secondsTime } from "../format";
import { entryFields } from "./refs";
import { defineTool, entryRef, ok, READ } from "./spec";

/** `receipts`: per recipient of the seat's entry, delivered, read and acked. */
export const receipts = defineTool({
  name: "receipts",
  title: "Receipts",
  description: "Per recipient of your entry: delivered, read, acked.",
  annotations: READ,
  input: { entry_id: entryRef },
  output: {
    receipts: z.array(
      z.object({ drone_id: z.string(), delivered: z.boolean(), read: z.boolean(), acked: z.boolean() }),
    ),
  },
  async run(session, input, signal) {
    const reply = await session.upstreams.activity.listReceipts(
      { cubeId: session.cubeId(), ...entryFields(input.entry_id) },
      await session.asActor(signal),
    );
    const when = (what: string, at: Parameters<typeof secondsTime>[0]) =>
      at ? `${what} ${secondsTime(at)}` : `not ${what}`;
    const lines = reply.receipts.map((r) => {
      const via = r.deliveredVia === DeliveryChannel.MACHINE_LINK ? " (machine)" : "";
      const parts = [
        when("delivered", r.deliveredAt) + (r.deliveredAt ? via : ""),
        when("read", r.readAt),
        when("acked", r.ackedAt),
      ];
      if (r.nudgedAt) parts.push(`nudged ${secondsTime(r.nudgedAt)}`);
      return `${r.label || r.droneId}: ${parts.join(", ")}`;
    });
    return ok(lines.join("\n") || "no recipients", {
      receipts: reply.receipts.map((r) => ({
        drone_id: r.droneId,
        delivered: r.deliveredAt !== undefined,
        read: r.readAt !== undefined,
        acked: r.ackedAt !== undefined,
      })),
    });
  },
});
