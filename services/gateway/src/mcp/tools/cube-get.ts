import { RoleClass } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { z } from "zod";
import { defineTool, ok, READ, uuid } from "./spec";

/** `cube_get`: a cube's directive, kinds and roles. */
export const cubeGet = defineTool({
  name: "cube_get",
  title: "Get a cube",
  description: "A cube's directive, kinds and roles.",
  annotations: READ,
  input: { cube_id: uuid.optional() },
  output: { roles: z.array(z.object({ id: z.string(), name: z.string() })) },
  async run(session, input, signal) {
    const cubeId = session.cubeFor(input.cube_id);
    const [cube, roles] = await Promise.all([
      session.upstreams.cube.getCube({ cubeId }, await session.asFor(input.cube_id, signal)),
      session.upstreams.cube.listRoles({ cubeId, pageSize: 500 }, await session.asFor(input.cube_id, signal)),
    ]);
    const flags = (r: (typeof roles.roles)[number]) =>
      [
        r.isDefault && "default",
        r.roleClass === RoleClass.QUEEN && "queen",
        r.humanSeat && "human seat",
        r.canBroadcast && "broadcasts",
      ].filter(Boolean);
    const kinds = cube.cube?.taxonomyKinds.join(", ");
    const lines = [
      `${cube.cube?.name}: ${cube.cube?.directive || "(no directive)"}`,
      ...(kinds ? [`kinds: ${kinds}`] : []),
      ...roles.roles.map(
        (r) =>
          `role ${r.name} (${r.id}${flags(r).length ? `, ${flags(r).join(", ")}` : ""})${r.shortDescription ? `: ${r.shortDescription}` : ""}`,
      ),
    ];
    return ok(lines.join("\n"), { roles: roles.roles.map((r) => ({ id: r.id, name: r.name })) });
  },
});
