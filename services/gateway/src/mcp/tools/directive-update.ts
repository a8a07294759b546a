import { UpdateCubeRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { contractString } from "../contract-schema";
import { defineTool, IDEMPOTENT, ok, uuid } from "./spec";

/** `directive_update`: replace a cube's directive. */
export const directiveUpdate = defineTool({
  name: "directive_update",
  title: "Update the directive",
  description: "Replace a cube's directive.",
  annotations: { ...IDEMPOTENT, destructiveHint: true },
  input: { directive: contractString(UpdateCubeRequestSchema, "directive"), cube_id: uuid.optional() },
  output: {},
  async run(session, input, signal) {
    await session.upstreams.cube.updateCube(
      { cubeId: session.cubeFor(input.cube_id), directive: input.directive },
      await session.asFor(input.cube_id, signal),
    );
    return ok("directive updated", {});
  },
});
