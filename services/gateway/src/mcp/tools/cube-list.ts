import { CubeAccess } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { z } from "zod";
import { preview } from "../format";
import { defineTool, ok, pageSize, pageToken, READ } from "./spec";

const ACCESS: Record<CubeAccess, string> = {
  [CubeAccess.UNSPECIFIED]: "",
  [CubeAccess.READ]: "read",
  [CubeAccess.WRITE]: "write",
  [CubeAccess.MANAGE]: "manage",
};

/** `cube_list`: the cubes the caller can see. */
export const cubeList = defineTool({
  name: "cube_list",
  title: "List cubes",
  description: "The cubes you can see.",
  annotations: READ,
  input: { page_size: pageSize, page_token: pageToken },
  output: { cubes: z.array(z.object({ id: z.string() })), next: z.string().optional() },
  async run(session, input, signal) {
    const reply = await session.upstreams.cube.listCubes(
      { pageSize: input.page_size ?? 0, pageToken: input.page_token ?? "" },
      await session.asCaller(signal),
    );
    const lines = reply.cubes.map((c) => `${c.name} (${c.id}, ${ACCESS[c.callerAccess]}): ${preview(c.directive)}`);
    if (reply.nextPageToken) lines.push(`more: page_token ${reply.nextPageToken}`);
    return ok(lines.join("\n") || "no cubes", {
      cubes: reply.cubes.map((c) => ({ id: c.id })),
      ...(reply.nextPageToken ? { next: reply.nextPageToken } : {}),
    });
  },
});
