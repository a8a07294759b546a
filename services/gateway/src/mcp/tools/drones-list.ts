import { type Drone, DronePosture } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { z } from "zod";
import { shortTime, stateName } from "../format";
import { listDrones, sinceAnchor } from "./refs";
import { defineTool, ok, READ, uuid } from "./spec";

/** `drones_list`: the cube's drones; with `since`, who posted after that entry or time. */
export const dronesList = defineTool({
  name: "drones_list",
  title: "List drones",
  description: "The cube's drones; since (#n, id or ISO time): who posted after it.",
  annotations: READ,
  input: {
    cube_id: uuid.optional(),
    since: z.string().max(64).optional(),
  },
  output: { drones: z.array(z.object({ id: z.string(), label: z.string() })) },
  async run(session, input, signal) {
    const cubeId = session.cubeFor(input.cube_id);
    let drones: Drone[];
    if (input.since !== undefined) {
      const anchor = sinceAnchor(session, input.since, input.cube_id);
      drones = (
        await session.upstreams.cube.dronesSince({ cubeId, anchor }, await session.asFor(input.cube_id, signal))
      ).drones;
    } else {
      drones = await listDrones(session, input.cube_id, signal);
    }
    const me = session.record.seat?.droneId;
    const lines = drones.map((d) => {
      const parts = [
        d.roleName,
        d.posture === DronePosture.OBSERVER ? "observer" : "participant",
        d.live ? `seen ${shortTime(d.lastSeenAt)}` : "gone",
        ...(d.lastLogPostAt ? [`posted ${shortTime(d.lastLogPostAt)}`] : []),
        ...(input.since !== undefined ? [d.seenSince ? "posted since" : "silent since"] : []),
        ...(d.state
          ? [`${stateName(d.state)} since ${shortTime(d.stateChangedAt)}${d.stateNote ? ` (${d.stateNote})` : ""}`]
          : []),
      ];
      return `${d.label}${d.id === me ? " (you)" : ""}: ${parts.join(", ")}`;
    });
    return ok(lines.join("\n") || "no drones", { drones: drones.map((d) => ({ id: d.id, label: d.label })) });
  },
});
