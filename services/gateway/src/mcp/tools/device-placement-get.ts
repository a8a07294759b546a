import { GetPlacementRequestSchema } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { z } from "zod";
import { contractString } from "../contract-schema";
import { defineTool, ok, READ } from "./spec";

/** `device_placement_get`: which device a root agent session is placed on. */
export const devicePlacementGet = defineTool({
  name: "device_placement_get",
  title: "Get a placement",
  description: "Which device a root agent session is placed on.",
  annotations: READ,
  input: { root_session_id: contractString(GetPlacementRequestSchema, "root_session_id") },
  output: { device_id: z.string().optional() },
  async run(session, input, signal) {
    const reply = await session.upstreams.placement.getPlacement(
      { rootSessionId: input.root_session_id },
      await session.asCaller(signal),
    );
    const device = reply.placement?.deviceId;
    return ok(device ? `on device ${device}` : "not placed", device ? { device_id: device } : {});
  },
});
